// test_comm_split_mpi.cpp — Communicator::split under a real mpirun: the
// TP x DP grid of support/split_grid.h (rows and columns, every collective
// against the serial oracle), a failing process stopping peers that wait in
// a group, and a message nobody received, in the world or a group, reported
// on every rank at the end. Each process records its own rank's view; the checks run after
// launch() returns, on every process (CHECK only, as test_comm_mpi.cpp says).
#include "support/catch.h"
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "support/comm_contract.h"
#include "support/mpi_world.h"
#include "support/split_grid.h"

using dpt::Context;
namespace split = dpt_test::split;

using dpt_test::mpi;
using dpt_test::world_size;

TEST_CASE("mpi split: rows and columns of a 2 x (n/2) grid each run every call among their members") {
  const int n = world_size(), tp = 2;
  if (n < 4 || n % tp != 0) return;  // every process skips alike: launches stay in step
  split::GridSeen seen;
  int rank = -1;
  dpt::launch(mpi(), [&](Context& ctx) {
    rank = ctx.rank;
    seen = split::run_grid(ctx, tp);
  });
  split::check_grid(seen, rank, tp, n);
}

TEST_CASE("mpi split: a failing process stops peers waiting in a group, which name its world rank") {
  const int n = world_size();
  if (n < 4) return;
  const int failing = n - 1;  // in the group {n-2, n-1}; groups are pairs of ranks
  std::string seen;
  int rank = -1;
  auto start = std::chrono::steady_clock::now();
  std::string message = dpt_test::contract::launch_message(mpi(20), [&](Context& ctx) {
    rank = ctx.rank;
    auto pair = ctx.comm.split(ctx.rank / 2, 0);
    if (ctx.rank == failing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      DPT_FAIL("boom on purpose");
    }
    try {
      float x = 0;
      pair->all_reduce(&x, 1, dpt::ReduceOp::Sum);
      ctx.comm.barrier();  // the other pairs wait for the failing one here
    } catch (const dpt::Error& e) {
      seen = e.what();
      throw;
    }
  });
  CHECK(dpt_test::seconds_since(start) < 8.0);  // far sooner than the 20 s timeout
  INFO("rank " << rank << ": " << message);
  CHECK(message.find("boom on purpose") != std::string::npos);
  if (rank != failing) {
    INFO("rank " << rank << " (waiting in its group or the world) heard: " << seen);
    CHECK(seen.find("stopped because rank " + std::to_string(failing) + " failed") != std::string::npos);
  }
}

TEST_CASE("mpi: a message nobody received is reported on every rank when the ranks end, in the world or a group") {
  const int n = world_size();
  for (bool in_group : {false, true}) {
    int rank = -1;
    std::string message = dpt_test::contract::launch_message(mpi(20), [&](Context& ctx) {
      rank = ctx.rank;
      auto pair = ctx.comm.split(ctx.rank / 2, 0);  // {0,1}, {2,3}, ...
      float x = 1;
      if (in_group && n >= 2) {
        if (ctx.rank == 0) pair->send(&x, 1, 1, 7);  // world rank 1 never receives it
      } else if (ctx.rank == 0) {
        ctx.comm.send(&x, 1, n - 1, 7);  // a small message: an eager send completes unreceived
      }
      ctx.comm.barrier();
    });
    const int receiver = in_group ? 1 : n - 1;
    INFO("rank " << rank << (in_group ? ", a group: " : ", the world: ") << message);
    CHECK(message.find("rank 0 sent 1 message(s) to rank " + std::to_string(receiver) + " that rank " +
                       std::to_string(receiver) + " never received") != std::string::npos);
  }
}
