// test_comm_mpi.cpp — the MPI communicator, one rank per process, under
// mpirun -np 2 and -np 4: the contract every backend keeps
// (support/comm_contract.h), then what only MPI launches do (one function call
// per process, --ranks against the process count, gathering traffic and
// traces from every process, async work with MPI_THREAD_MULTIPLE).
//
// Each process runs this whole file. Every test case calls dpt::launch with
// comm = "mpi" the same number of times on every rank, and asserts after the
// launch returns with CHECK only (a REQUIRE that stops one rank's test case
// early would put the ranks' launches out of step, and the others would wait
// for it). A failed comparison prints one line (support/comm_contract.h's
// first_difference), never the vectors.
#include "support/catch.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support/comm_contract.h"
#include "support/comm_contract_typed.h"
#include "support/mpi_world.h"
#include "dpt/comm.h"
#include "dpt/launch.h"

using dpt::Context;
using dpt::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

using dpt_test::mpi;
using dpt_test::world_size;

using dpt_test::contract::contribution;
using dpt_test::contract::serial_reduce;
using dpt_test::first_difference;

std::vector<dpt_test::ContractWorld> mpi_worlds() {
  return {{"mpi, " + std::to_string(world_size()) + " processes", mpi(), world_size()}};
}

}  // namespace

// ----------------------------------------------------------------------------
// the contract every backend keeps

DPT_COMM_CONTRACT_TESTS("mpi", mpi_worlds)
DPT_COMM_TYPED_CONTRACT_TESTS("mpi", mpi_worlds)

// ----------------------------------------------------------------------------
// MPI launches

TEST_CASE("mpi launch runs fn once in each process, as its MPI rank") {
  int calls = 0, rank = -1, world = 0, device = -1, label = -2;
  std::string backend;
  dpt::launch(mpi(), [&](Context& ctx) {
    ++calls;
    rank = ctx.rank;
    world = ctx.world;
    device = ctx.device.index();
    label = dpt::error_rank();
    backend = ctx.comm.backend();
  });
  CHECK(calls == 1);
  CHECK(world == world_size());
  CHECK(rank == std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  CHECK(device == rank);
  CHECK(label == rank);
  CHECK(backend == "mpi");
}

TEST_CASE("mpi --ranks that disagrees with the process count is refused") {
  dpt::LaunchOptions o = mpi();
  o.ranks = world_size() + 1;
  bool ran = false;
  CHECK_THROWS_WITH(dpt::launch(o, [&](Context&) { ran = true; }), contains_text("mpirun -np"));
  CHECK_FALSE(ran);
}

TEST_CASE("mpi traffic log: each process logs its sends, gather_traffic gives every rank the matrix") {
  // n-1 ring steps of S/n floats each: every rank sends (n-1)/n * S floats,
  // all of it to its right neighbour.
  const int n = world_size();
  const int64_t chunk = 1000, total = chunk * n;
  int rank = -1;
  std::vector<std::vector<int64_t>> local, gathered;
  int64_t all_reduce_bytes = -1;
  dpt::launch(mpi(), [&](Context& ctx) {
    rank = ctx.rank;
    std::vector<float> buf(total), in(chunk);
    for (int step = 0; step < n - 1; ++step)
      ctx.comm.sendrecv(buf.data(), chunk, (rank + 1) % n, in.data(), chunk, (rank + n - 1) % n);
    ctx.comm.all_reduce(buf.data(), total, ReduceOp::Sum);
    local = ctx.comm.traffic().matrix();
    dpt::TrafficLog all = ctx.comm.gather_traffic();
    gathered = all.matrix();
    all_reduce_bytes = all.collective_bytes("all_reduce");
  });
  INFO("rank " << rank);
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      int64_t expected = dst == (src + 1) % n ? 4 * chunk * (n - 1) : 0;
      CHECK(gathered[src][dst] == expected);
      CHECK(local[src][dst] == (src == rank ? expected : 0));  // only our own row
    }
  }
  CHECK(all_reduce_bytes == int64_t(n) * 4 * total);
}

TEST_CASE("mpi: a send to a peer that sends nothing back says the peer may have stopped, not only send order") {
  // Rank 1 computes (sleeps) past rank 0's timeout while rank 0 sends it
  // 4 MiB (rendezvous): rank 1 has nothing on its way to rank 0, so "both ranks
  // are sending" is not the cause. Rank 1 wakes within the grace
  // finish() gives a silent rank (min(timeout, 5 s)), so the job goes on.
  std::string message = dpt_test::contract::launch_message(mpi(1.0), [](Context& ctx) {
    std::vector<float> buf(1 << 20);
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    if (ctx.rank == 0) ctx.comm.send(buf.data(), 1 << 20, 1);
  });
  INFO(message);
  CHECK(message.find("rank 0 waited 1.0 s in send to rank 1") != std::string::npos);
  CHECK(message.find("rank 1 sends nothing to this rank either: it waits on another rank, or it stopped (frozen, "
                     "or far slower)") != std::string::npos);
  CHECK(message.find("both ranks are sending") == std::string::npos);
}

TEST_CASE("mpi async all_reduce runs beside the rank and later blocking calls wait their turn") {
  const int n = world_size();
  std::vector<float> a, b;
  dpt::launch(mpi(), [&](Context& ctx) {
    a = contribution(ctx.rank, 50001);
    b = contribution(ctx.rank, 50001);
    auto work = ctx.comm.all_reduce_async(a.data(), 50001, ReduceOp::Sum);
    ctx.comm.all_reduce(b.data(), 50001, ReduceOp::Avg);
    work->wait();
  });
  CHECK(first_difference(a, serial_reduce(n, 50001, 0, ReduceOp::Sum)) == "");
  CHECK(first_difference(b, serial_reduce(n, 50001, 0, ReduceOp::Avg)) == "");
}

TEST_CASE("mpi trace: rank 0 writes one file with one track per rank") {
  const int n = world_size();
  int rank = -1;
  dpt::LaunchOptions o = mpi();
  // Only rank 0's path is written; the others just switch tracing on.
  o.trace_path = (std::filesystem::temp_directory_path() /
                  ("dpt_mpi_trace_" + std::to_string(getpid()) + ".json")).string();
  dpt::launch(o, [&](Context& ctx) {
    rank = ctx.rank;
    {
      auto span = ctx.trace.span("forward", "compute");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::vector<float> grad(256, 1.0f);
    ctx.comm.all_reduce(grad.data(), 256, ReduceOp::Sum);
  });
  if (rank != 0) return;
  std::ifstream in(o.trace_path);
  CHECK(in.good());
  if (!in) return;
  nlohmann::json doc = nlohmann::json::parse(in);
  for (int r = 0; r < n; ++r) {
    INFO("track " << r);
    int names = 0, forward = 0, reduce = 0;
    for (const auto& e : doc["traceEvents"]) {
      if (e["tid"] != r) continue;
      names += e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "rank " + std::to_string(r);
      forward += e["ph"] == "X" && e["name"] == "forward" && e["cat"] == "compute";
      reduce += e["ph"] == "X" && e["name"] == "all_reduce" && e["args"]["bytes"] == 1024;
    }
    CHECK(names == 1);
    CHECK(forward == 1);
    CHECK(reduce == 1);
  }
  std::remove(o.trace_path.c_str());
}
