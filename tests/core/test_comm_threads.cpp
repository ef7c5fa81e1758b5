// test_comm_threads.cpp — the threads communicator: the contract every backend
// keeps (support/comm_contract.h) with 2, 3 and 4 ranks, then what only the
// threads backend promises: rank-order sums bit for bit, every path a message
// can take through the mailbox, the deadlock report, the eager limit, the
// traffic log shared by all ranks, the link model, async work.
//
// Here: the contract, point-to-point, collectives, the traffic log, async
// work; failures in test_comm_threads_failures.cpp, the link model in
// test_comm_threads_link.cpp.
//
// Every rank runs on its own thread, and Catch2 assertions are not
// thread-safe: rank functions only record what they saw into per-rank slots,
// and the assertions run on the test's thread after launch() returns.
#include "support/catch.h"
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "support/comm_contract.h"
#include "support/comm_contract_typed.h"
#include "support/threads_world.h"
#include "dpt/comm.h"
#include "dpt/launch.h"

using dpt::Context;
using dpt::ReduceOp;
using dpt_test::threads;

namespace {

std::vector<dpt_test::ContractWorld> threads_worlds() {
  std::vector<dpt_test::ContractWorld> worlds;
  for (int n : {2, 3, 4}) worlds.push_back({"threads, " + std::to_string(n) + " ranks", threads(n), n});
  return worlds;
}

// A rank-dependent value that floats cannot hold exactly (k/7), so summation
// order shows in the last bits. Only IEEE division and subtraction: the same
// bits in every context (no libm, nothing to fuse into an FMA).
float value(int rank, int64_t i) {
  uint64_t h = uint64_t(i) * 2654435761u + uint64_t(rank) * 40503u;
  return float(h % 2003) / 7.0f - 100.0f;
}

std::vector<float> contribution(int rank, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

// The serial oracle: sum (or max) over ranks 0..n-1 in that order, then / n for Avg.
std::vector<float> serial_reduce(int n, int64_t count, int64_t offset, ReduceOp op) {
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) {
    float s = value(0, offset + i);
    for (int r = 1; r < n; ++r) s = op == ReduceOp::Max ? std::max(s, value(r, offset + i)) : s + value(r, offset + i);
    out[i] = op == ReduceOp::Avg ? s / float(n) : s;
  }
  return out;
}

int64_t mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int64_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
  return bad;
}

}  // namespace

// ----------------------------------------------------------------------------
// the contract every backend keeps

DPT_COMM_CONTRACT_TESTS("threads", threads_worlds)
DPT_COMM_TYPED_CONTRACT_TESTS("threads", threads_worlds)

// ----------------------------------------------------------------------------
// point-to-point

TEST_CASE("threads recv that waits before the send gets the data (rendezvous path)") {
  std::vector<float> got(1000, -1);
  dpt::launch(threads(2), [&](Context& ctx) {
    if (ctx.rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let rank 1 post first
      std::vector<float> data = contribution(0, 1000);
      ctx.comm.send(data.data(), 1000, 1);
    } else {
      ctx.comm.recv(got.data(), 1000, 0);
    }
  });
  CHECK(mismatches(got, contribution(0, 1000)) == 0);
}

TEST_CASE("threads sendrecv whose peer arrives later, with plain recv and send, completes") {
  // Rank 0 lends its buffer (rank 1 has not posted yet) and must wait until
  // rank 1's recv has copied it; then rank 1's send lands in rank 0's receive.
  std::vector<float> at0(3, -1), at1(3, -1);
  dpt::launch(threads(2), [&](Context& ctx) {
    std::vector<float> mine(3, float(ctx.rank + 10));
    if (ctx.rank == 0) {
      ctx.comm.sendrecv(mine.data(), 3, 1, at0.data(), 3, 1);
      mine.assign(3, -5);  // must not reach rank 1: it has copied before sendrecv returned
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ctx.comm.recv(at1.data(), 3, 0);
      ctx.comm.send(mine.data(), 3, 0);
    }
  });
  CHECK(at0 == std::vector<float>(3, 11));
  CHECK(at1 == std::vector<float>(3, 10));
}

TEST_CASE("threads sendrecv to a rank that returns without receiving is an error") {
  std::string message;
  try {
    dpt::launch(threads(2, 20), [](Context& ctx) {
      float out = 1, in = 0;
      if (ctx.rank == 0) ctx.comm.sendrecv(&out, 1, 1, &in, 1, 1);
      else ctx.comm.send(&out, 1, 0);  // answers, but never receives
    });
  } catch (const dpt::Error& e) {
    message = e.what();
  }
  // Rank 0 is told either while it waits ("... without receiving them") or,
  // if rank 1 was quicker, when it starts ("... nobody will receive it").
  INFO(message);
  CHECK(message.find("but rank 1 has finished its function") != std::string::npos);
}

// ----------------------------------------------------------------------------
// collectives against serial computations

TEST_CASE("threads all_reduce equals a serial sum in rank order, on every rank") {
  // Exact comparison: the threads backend documents that it sums in rank
  // order, so the result must be bit-identical to the serial loop.
  for (int n : {1, 2, 3, 4}) {
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t((1 << 20) + 3)}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        std::vector<std::vector<float>> result(n);
        dpt::launch(threads(n), [&](Context& ctx) {
          result[ctx.rank] = contribution(ctx.rank, count);
          ctx.comm.all_reduce(result[ctx.rank].data(), count, op);
        });
        std::vector<float> expected = serial_reduce(n, count, 0, op);
        INFO("ranks " << n << ", count " << count << ", op " << dpt::reduce_op_name(op));
        for (int r = 0; r < n; ++r) CHECK(mismatches(result[r], expected) == 0);
      }
    }
  }
}

// ----------------------------------------------------------------------------
// traffic log

TEST_CASE("traffic log counts exactly the bytes each rank sent to each rank, per step") {
  const int n = 3;
  std::vector<std::vector<int64_t>> shared_matrix, gathered_matrix;
  dpt::TrafficLog gathered(1), shared(1);
  dpt::launch(threads(n), [&](Context& ctx) {
    const int right = (ctx.rank + 1) % n, left = (ctx.rank + n - 1) % n;
    // step 0: rank r sends 10(r+1) floats to its right neighbour
    std::vector<float> buf(100);
    ctx.comm.send(buf.data(), 10 * (ctx.rank + 1), right);
    ctx.comm.recv(buf.data(), 10 * (left + 1), left);
    // step 1: 5 floats to each other rank, then one sendrecv of 7 to the right
    ctx.comm.traffic().set_step(1);
    for (int peer = 0; peer < n; ++peer)
      if (peer != ctx.rank) ctx.comm.send(buf.data(), 5, peer, 3);
    for (int peer = 0; peer < n; ++peer)
      if (peer != ctx.rank) ctx.comm.recv(buf.data(), 5, peer, 3);
    std::vector<float> in(7);
    ctx.comm.sendrecv(buf.data(), 7, right, in.data(), 7, left);
    // library collectives are recorded apart from point-to-point bytes
    ctx.comm.all_reduce(buf.data(), 100, ReduceOp::Sum);
    dpt::TrafficLog all = ctx.comm.gather_traffic();
    if (ctx.rank == 0) {
      gathered = all;
      shared = ctx.comm.traffic();
    }
  });
  for (const dpt::TrafficLog* log : {&shared, &gathered}) {
    for (int src = 0; src < n; ++src) {
      for (int dst = 0; dst < n; ++dst) {
        bool right = dst == (src + 1) % n;
        int64_t step0 = right ? 4 * 10 * (src + 1) : 0;
        int64_t step1 = src == dst ? 0 : 4 * 5 + (right ? 4 * 7 : 0);
        INFO("src " << src << " dst " << dst);
        CHECK(log->bytes(src, dst, 0) == step0);
        CHECK(log->bytes(src, dst, 1) == step1);
        CHECK(log->bytes(src, dst) == step0 + step1);
        CHECK(log->messages(src, dst) == (src == dst ? 0 : right ? 3 : 1));
      }
    }
    CHECK(log->bytes_sent(1) == 4 * 20 + 2 * 20 + 28);
    CHECK(log->steps() == std::vector<int64_t>{0, 1});
    CHECK(log->step_bytes(0) == 4 * (10 + 20 + 30));
    CHECK(log->total_bytes() == 4 * (10 + 20 + 30) + n * (2 * 20 + 28));
    CHECK(log->collective_bytes("all_reduce") == n * 400);
    CHECK(log->collective_calls("all_reduce", 2) == 1);
    CHECK(log->collective_bytes("broadcast") == 0);
  }
  CHECK_THROWS_AS(shared.collective_bytes("allreduce"), dpt::Error);
}

TEST_CASE("threads max reduces in rank order, and Avg divides the rank-order sum") {
  // Max of -0.0 and 0.0 compares equal: the backend keeps the first (rank 0's).
  std::vector<std::vector<float>> result(3);
  dpt::launch(threads(3), [&](Context& ctx) {
    result[ctx.rank] = {ctx.rank == 0 ? -0.0f : 0.0f, float(ctx.rank), -float(ctx.rank)};
    ctx.comm.all_reduce(result[ctx.rank].data(), 3, ReduceOp::Max);
  });
  for (int r = 0; r < 3; ++r) {
    CHECK(std::signbit(result[r][0]));
    CHECK(result[r][1] == 2.0f);
    CHECK(result[r][2] == 0.0f);
  }
}

// ----------------------------------------------------------------------------
// async work and tensors

TEST_CASE("async all_reduce gives the blocking result, and later blocking calls wait their turn") {
  const int n = 3, count = 10001;
  std::vector<int64_t> bad(n, -1);
  std::vector<std::string> async_error(n);
  dpt::launch(threads(n), [&](Context& ctx) {
    std::vector<float> a = contribution(ctx.rank, count), b = contribution(ctx.rank, count);
    auto work = ctx.comm.all_reduce_async(a.data(), count, ReduceOp::Sum);
    // Issued while `work` may still be pending: must run after it, not beside it.
    ctx.comm.all_reduce(b.data(), count, ReduceOp::Avg);
    work->wait();
    bad[ctx.rank] = mismatches(a, serial_reduce(n, count, 0, ReduceOp::Sum)) +
                    mismatches(b, serial_reduce(n, count, 0, ReduceOp::Avg));
    // A ring built from sendrecv, run as async work (what chapter 05 does).
    int right = (ctx.rank + 1) % n, left = (ctx.rank + n - 1) % n;
    float out = float(ctx.rank), in = -1;
    ctx.comm.async([&] { ctx.comm.sendrecv(&out, 1, right, &in, 1, left); })->wait();
    bad[ctx.rank] += in != float(left);
    try {
      ctx.comm.async([] { DPT_FAIL("async failure"); })->wait();
    } catch (const dpt::Error& e) {
      async_error[ctx.rank] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) {
    CHECK(bad[r] == 0);
    CHECK(async_error[r].find("async failure") != std::string::npos);
  }
}

TEST_CASE("tensor conveniences move a tensor's elements, views included") {
  const int n = 2;
  std::vector<std::vector<float>> reduced(n), received(n);
  dpt::launch(threads(n), [&](Context& ctx) {
    dpt::Tensor t = dpt::Tensor::from_vector({2, 3}, contribution(ctx.rank, 6), ctx.device);
    ctx.comm.all_reduce(t, ReduceOp::Sum);
    reduced[ctx.rank] = t.to_vector();
    dpt::Tensor buf = dpt::Tensor::zeros({4}, ctx.device);
    dpt::Tensor mine = dpt::Tensor::full({2}, float(ctx.rank + 1), ctx.device);
    ctx.comm.sendrecv(mine, 1 - ctx.rank, buf.slice(2, 2), 1 - ctx.rank);  // into a view
    received[ctx.rank] = buf.to_vector();
  });
  for (int r = 0; r < n; ++r) {
    CHECK(mismatches(reduced[r], serial_reduce(n, 6, 0, ReduceOp::Sum)) == 0);
    float other = float(2 - r);
    CHECK(received[r] == std::vector<float>{0, 0, other, other});
  }
}
