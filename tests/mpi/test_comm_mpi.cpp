// test_comm_mpi.cpp — the MPI communicator, one rank per process, under mpirun.
//
// Each process runs this whole file. Every test case calls dpt::launch with
// comm = "mpi" the same number of times on every rank, and asserts after the
// launch returns (never between two launches with REQUIRE, so one rank's
// failed assertion cannot make the ranks' launches fall out of step).
//
// Oracles are computed on every rank: each rank's contribution is a known
// function of (rank, index), integer-valued and small, so a sum of them is
// exact in float whatever order MPI's reduction takes (integers below 2^24
// add exactly), and results compare with ==.
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

#include "support/timeout_message.h"
#include "dpt/comm.h"
#include "dpt/launch.h"

using dpt::Context;
using dpt::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

dpt::LaunchOptions mpi(double timeout_s = 20) {
  dpt::LaunchOptions o;
  o.comm = "mpi";
  o.timeout_s = timeout_s;
  return o;
}

int world_size() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::atoi(size) : 1;
}

float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 101) - 50.0f; }

std::vector<float> contribution(int rank, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

std::vector<float> serial_reduce(int n, int64_t count, int64_t offset, ReduceOp op) {
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += value(r, offset + i);
    out[i] = op == ReduceOp::Avg ? s / float(n) : s;
  }
  return out;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using dpt_test::parse_wait;

}  // namespace

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

TEST_CASE("mpi collectives equal serial computations, for sizes 0, 1, 7 and large") {
  const int n = world_size();
  for (int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t((1 << 18) + 3)}) {
    int rank = -1;
    std::vector<float> sum, avg, scattered, gathered, in_place, bcast;
    std::vector<std::vector<float>> broadcast_from(n);
    dpt::launch(mpi(), [&](Context& ctx) {
      rank = ctx.rank;
      sum = contribution(rank, count);
      ctx.comm.all_reduce(sum.data(), count, ReduceOp::Sum);
      avg = contribution(rank, count);
      ctx.comm.all_reduce(avg.data(), count, ReduceOp::Avg);
      std::vector<float> rows = contribution(rank, count * n);
      scattered.assign(count, -1);
      ctx.comm.reduce_scatter(rows.data(), scattered.data(), count, ReduceOp::Sum);
      std::vector<float> mine = contribution(rank, count);
      gathered.assign(count * n, -1);
      ctx.comm.all_gather(mine.data(), gathered.data(), count);
      in_place.assign(count * n, -1);
      std::copy(mine.begin(), mine.end(), in_place.begin() + rank * count);
      ctx.comm.all_gather(in_place.data() + rank * count, in_place.data(), count);
      for (int root = 0; root < n; ++root) {
        broadcast_from[root] = contribution(rank, count);
        ctx.comm.broadcast(broadcast_from[root].data(), count, root);
      }
      ctx.comm.barrier();
    });
    INFO("rank " << rank << ", count " << count);
    CHECK(sum == serial_reduce(n, count, 0, ReduceOp::Sum));
    CHECK(avg == serial_reduce(n, count, 0, ReduceOp::Avg));
    CHECK(scattered == serial_reduce(n, count, rank * count, ReduceOp::Sum));
    std::vector<float> expected;
    for (int r = 0; r < n; ++r) {
      auto part = contribution(r, count);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    CHECK(gathered == expected);
    CHECK(in_place == expected);
    for (int root = 0; root < n; ++root) CHECK(broadcast_from[root] == contribution(root, count));
  }
}

TEST_CASE("mpi sendrecv ring delivers the left neighbour's data; send/recv keep order per tag") {
  const int n = world_size();
  int rank = -1, bad = -1;
  std::vector<float> first, second, other_tag;
  dpt::launch(mpi(5), [&](Context& ctx) {
    rank = ctx.rank;
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    bad = 0;
    std::vector<float> out(100003), in(100003);
    for (int step = 0; step < 10; ++step) {
      std::fill(out.begin(), out.end(), float(rank * 100 + step));
      ctx.comm.sendrecv(out.data(), 100003, right, in.data(), 100003, left);
      for (float x : in) bad += x != float(left * 100 + step);
    }
    if (rank == 0) {
      std::vector<float> a = {1, 2}, b = {3, 4}, c = {5};
      ctx.comm.send(a.data(), 2, 1, 0);
      ctx.comm.send(b.data(), 2, 1, 0);
      ctx.comm.send(c.data(), 1, 1, 9);
    } else if (rank == 1) {
      first.resize(2), second.resize(2), other_tag.resize(1);
      ctx.comm.recv(other_tag.data(), 1, 0, 9);
      ctx.comm.recv(first.data(), 2, 0, 0);
      ctx.comm.recv(second.data(), 2, 0, 0);
    }
  });
  CHECK(bad == 0);
  if (rank == 1) {
    CHECK(first == std::vector<float>{1, 2});
    CHECK(second == std::vector<float>{3, 4});
    CHECK(other_tag == std::vector<float>{5});
  }
}

TEST_CASE("mpi traffic log: each process logs its sends; gather_traffic gives every rank the matrix") {
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

TEST_CASE("mpi deadlock (every rank receives from its left) times out naming the rank") {
  const int n = world_size();
  const double timeout = 0.5;
  int rank = -1;
  std::string message;
  Clock::time_point start = Clock::now();
  try {
    dpt::launch(mpi(timeout), [&](Context& ctx) {
      rank = ctx.rank;
      float x = 0;
      ctx.comm.recv(&x, 1, (rank + n - 1) % n);
    });
  } catch (const dpt::Error& e) {
    message = e.what();
  }
  double elapsed = seconds_since(start);
  INFO("rank " << rank << ": " << message);
  CHECK(elapsed >= timeout * 0.9);  // some rank waited its full timeout before anyone gave up
  CHECK(elapsed < timeout + 5.0);
  // Our own timeout, or a peer's reported to us: either way it names a rank
  // and the left neighbour it waited for.
  int waiting = -1, on = -1;
  REQUIRE(parse_wait(message, &waiting, &on));
  CHECK(on == (waiting + n - 1) % n);
  if (message.find("stopped because") == std::string::npos) CHECK(waiting == rank);
}

TEST_CASE("mpi: a rank that throws stops the others, which report its message") {
  int rank = -1;
  std::string message;
  bool peer_failed = false;
  Clock::time_point start = Clock::now();
  try {
    dpt::launch(mpi(20), [&](Context& ctx) {
      rank = ctx.rank;
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        DPT_FAIL("boom on purpose");
      }
      float x = 0;
      ctx.comm.recv(&x, 1, 1);  // rank 1 never sends
    });
  } catch (const dpt::PeerFailed& e) {
    peer_failed = true;
    message = e.what();
  } catch (const dpt::Error& e) {
    message = e.what();
  }
  INFO("rank " << rank << ": " << message);
  CHECK(seconds_since(start) < 5.0);  // far sooner than the 20 s timeout
  CHECK(message.find("boom on purpose") != std::string::npos);
  CHECK(peer_failed == (rank != 1));
  if (rank != 1) CHECK(message.find("stopped because rank 1 failed: [rank 1]") != std::string::npos);
}

TEST_CASE("mpi: a recv count that differs from the send, or collective counts that differ, are errors") {
  int rank = -1;
  std::string p2p, collective;
  try {
    dpt::launch(mpi(), [&](Context& ctx) {
      rank = ctx.rank;
      std::vector<float> buf(8);
      if (rank == 0) ctx.comm.send(buf.data(), 4, 1);
      if (rank == 1) ctx.comm.recv(buf.data(), 8, 0);
    });
  } catch (const dpt::Error& e) {
    p2p = e.what();
  }
  try {
    dpt::launch(mpi(), [&](Context& ctx) {
      std::vector<float> buf(64);
      ctx.comm.all_reduce(buf.data(), 1 + ctx.rank, ReduceOp::Sum);
    });
  } catch (const dpt::Error& e) {
    collective = e.what();
  }
  INFO("rank " << rank << ": " << p2p);
  CHECK(p2p.find("expected 8 floats from rank 0") != std::string::npos);
  CHECK(p2p.find("sent 4 floats") != std::string::npos);
  if (rank != 1) CHECK(p2p.find("stopped because rank 1 failed") != std::string::npos);
  INFO(collective);
  CHECK(collective.find("different counts") != std::string::npos);
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
  CHECK(a == serial_reduce(n, 50001, 0, ReduceOp::Sum));
  CHECK(b == serial_reduce(n, 50001, 0, ReduceOp::Avg));
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
  REQUIRE(in);
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
