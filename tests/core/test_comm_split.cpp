// test_comm_split.cpp — Communicator::split under threads: groups of a
// TP x DP grid against a serial oracle (support/split_grid.h), ranks ordered
// by key, nested groups, two groups used in turn, and how a group fails: a
// rank that throws stops peers waiting in a group (PeerFailed naming it), a
// rank that never calls is a timeout naming it, a message left unreceived in
// a group is reported at the end, a negative color a sentence.
#include "support/catch.h"
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "support/comm_contract.h"
#include "dpt/report.h"  // seconds_since
#include "support/split_grid.h"
#include "support/threads_world.h"

using dpt::Context;
using Clock = std::chrono::steady_clock;
using dpt::seconds_since;
using dpt_test::threads;
namespace split = dpt_test::split;

// ----------------------------------------------------------------------------
// what a group computes

TEST_CASE("split: rows and columns of a TP x DP grid each run every call among their members") {
  struct Grid { int world, tp; };
  for (Grid g : {Grid{4, 2}, Grid{6, 2}, Grid{6, 3}}) {
    INFO(g.world << " ranks, tp " << g.tp);
    std::vector<split::GridSeen> seen(g.world);
    dpt::LaunchOptions o = threads(g.world);
    o.eager_limit_bytes = 0;  // every send a rendezvous: no buffering hides a wrong peer
    dpt::launch(o, [&](Context& ctx) { seen[ctx.rank] = split::run_grid(ctx, g.tp); });
    for (int w = 0; w < g.world; ++w) split::check_grid(seen[w], w, g.tp, g.world);
  }
}

TEST_CASE("split: ranks are ordered by key, ties by parent rank") {
  // One color; key = rank % 2, so the evens come first, each half in rank order.
  const int n = 6;
  std::vector<int> new_rank(n, -1), parents;
  dpt::launch(threads(n), [&](Context& ctx) {
    auto all = ctx.comm.split(0, ctx.rank % 2);
    new_rank[ctx.rank] = all->rank();
    if (ctx.rank == 0)
      for (int r = 0; r < all->size(); ++r) parents.push_back(all->parent_rank(r));
  });
  INFO("new rank of each world rank (key = rank % 2): evens 0, 2, 4 first, then odds");
  CHECK(new_rank == std::vector<int>{0, 3, 1, 4, 2, 5});
  CHECK(parents == std::vector<int>{0, 2, 4, 1, 3, 5});
}

TEST_CASE("split: a group of a group (nested) maps its ranks to the parent, and to the world through it") {
  // 6 ranks -> halves {0,1,2} and {3,4,5} -> in each half, color = half rank % 2.
  const int n = 6;
  std::vector<int> size(n), parent(n), world_of(n);
  std::vector<std::vector<float>> sum(n);
  std::vector<int64_t> bytes(n);
  dpt::launch(threads(n), [&](Context& ctx) {
    auto half = ctx.comm.split(ctx.rank / 3, ctx.rank);
    auto pair = half->split(half->rank() % 2, half->rank());
    size[ctx.rank] = pair->size();
    parent[ctx.rank] = pair->parent_rank(pair->rank());
    world_of[ctx.rank] = half->parent_rank(pair->parent_rank(pair->rank()));
    sum[ctx.rank] = split::values(ctx.rank, 4);
    pair->all_reduce(sum[ctx.rank].data(), 4, dpt::ReduceOp::Sum);
    float x = float(ctx.rank), y = -1;
    if (pair->size() == 2) pair->sendrecv(&x, 1, 1 - pair->rank(), &y, 1, 1 - pair->rank());
    pair->barrier();  // both sends recorded before either reads the shared log
    bytes[ctx.rank] = pair->traffic().total_bytes();
  });
  const std::vector<std::vector<int>> groups = {{0, 2}, {1}, {3, 5}, {4}};
  for (const auto& m : groups) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      const int w = m[i];
      INFO("world rank " << w << " in nested group " << ::Catch::Detail::stringify(m));
      CHECK(size[w] == int(m.size()));
      CHECK(parent[w] == w % 3);  // its rank in its half
      CHECK(world_of[w] == w);
      std::vector<float> want(4, 0);
      for (int member : m)
        for (int i2 = 0; i2 < 4; ++i2) want[i2] += split::values(member, 4)[i2];
      CHECK(dpt_test::first_difference(sum[w], want) == "");
      CHECK(bytes[w] == (m.size() == 2 ? 2 * 4 : 0));  // both members' sends, in the pair's shared log
    }
  }
}

TEST_CASE("split: one rank uses its row and its column in turn, blocking and async") {
  const int n = 4, tp = 2;
  std::vector<std::vector<float>> out(n);
  dpt::launch(threads(n), [&](Context& ctx) {
    const int t = ctx.rank % tp, d = ctx.rank / tp;
    auto row = ctx.comm.split(d, t);
    auto col = ctx.comm.split(t, d);
    std::vector<float> a = split::values(ctx.rank, 3), b = a;
    for (int round = 0; round < 3; ++round) {  // row, column, row, ...: nothing crosses
      row->all_reduce(a.data(), 3, dpt::ReduceOp::Sum);
      col->all_reduce(b.data(), 3, dpt::ReduceOp::Sum);
    }
    auto pending = row->all_reduce_async(a.data(), 3, dpt::ReduceOp::Max);
    col->barrier();
    pending->wait();
    out[ctx.rank] = a;
    out[ctx.rank].insert(out[ctx.rank].end(), b.begin(), b.end());
  });
  for (int w = 0; w < n; ++w) {
    // a: summed 3 times over the row (after the first both members hold r, then 2r, 4r), then max: 4r
    const int mate_row = w ^ 1, mate_col = w ^ 2;
    std::vector<float> want(6);
    for (int i = 0; i < 3; ++i) {
      float r = split::values(w, 3)[i] + split::values(mate_row, 3)[i];
      float c = split::values(w, 3)[i] + split::values(mate_col, 3)[i];
      want[i] = r * 4;      // sum, then sums of two equal values twice
      want[3 + i] = c * 4;
    }
    INFO("world rank " << w << ": row results then column results");
    CHECK(dpt_test::first_difference(out[w], want) == "");
  }
}

TEST_CASE("split: a rank's messages on two groups share its one simulated port") {
  // Ranks 1 and 2 each send S bytes to rank 0 at once, rank 1 in group {0,1},
  // rank 2 in group {0,2}. Rank 0 has one in-port whatever the communicator,
  // so the two transfers queue: the second arrives after 2 S/beta = 0.6 s
  // (separate ports per group would let both arrive at 0.3 s).
  const int64_t floats = 375000;  // 1.5 MB: 0.3 s at 0.04 Gbit/s
  dpt::LaunchOptions o = threads(3);
  o.link.gbps = 0.04;
  o.eager_limit_bytes = int64_t(1) << 24;  // eager: each sender returns at its own departure
  double rank0_s = 0;
  dpt::launch(o, [&](Context& ctx) {
    auto a = ctx.comm.split(ctx.rank == 2, 0);  // {0,1}, {2}
    auto b = ctx.comm.split(ctx.rank == 1, 0);  // {0,2}, {1}
    std::vector<float> buf(floats);
    ctx.comm.barrier();
    Clock::time_point start = Clock::now();
    if (ctx.rank == 1) a->send(buf.data(), floats, 0);
    if (ctx.rank == 2) b->send(buf.data(), floats, 0);
    if (ctx.rank == 0) {
      a->recv(buf.data(), floats, 1);
      b->recv(buf.data(), floats, 1);
      rank0_s = seconds_since(start);
    }
  });
  INFO("rank 0 received both messages after " << rank0_s << " s; the model says 0.6 s");
  CHECK(rank0_s >= 0.55);
  CHECK(rank0_s < 3.0);
}

// ----------------------------------------------------------------------------
// how a group fails

TEST_CASE("split: a rank that throws stops peers waiting in a group with PeerFailed naming it", "[faults]") {
  // Rows {0,1}, {2,3}; columns {0,2}, {1,3}. Rank 1 throws; rank 0 waits on it
  // in a row recv, rank 3 in a column all_reduce, rank 2 in a column
  // all_reduce with rank 0.
  const int n = 4;
  std::vector<std::string> peer_message(n);
  Clock::time_point start = Clock::now();
  std::string error;
  try {
    dpt::launch(threads(n, 10), [&](Context& ctx) {
      auto row = ctx.comm.split(ctx.rank / 2, 0);
      auto col = ctx.comm.split(ctx.rank % 2, 0);
      try {
        float x[2] = {0, 0};
        if (ctx.rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          DPT_FAIL("rank 1's planted failure");
        }
        if (ctx.rank == 0) row->recv(x, 1, 1);
        col->all_reduce(x, 2, dpt::ReduceOp::Sum);
      } catch (const dpt::PeerFailed& e) {
        peer_message[ctx.rank] = e.what();
        throw;
      }
    });
  } catch (const dpt::Error& e) {
    error = e.what();
  }
  INFO(error);
  CHECK(error.find("rank 1's planted failure") != std::string::npos);
  CHECK(seconds_since(start) < 5.0);  // stopped by the failure, long before the 10 s timeout
  for (int r : {0, 2, 3}) {
    INFO("rank " << r << " waiting in a group hears which world rank failed: " << peer_message[r]);
    CHECK(peer_message[r].find("world rank 1") != std::string::npos);
    CHECK(peer_message[r].find("planted failure") != std::string::npos);
  }
}

TEST_CASE("split: a rank that never calls split is a timeout naming it", "[faults]") {
  const double timeout = 0.5;
  std::string message;
  Clock::time_point start = Clock::now();
  try {
    dpt::launch(threads(4, timeout), [&](Context& ctx) {
      if (ctx.rank == 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return;
      }
      ctx.comm.split(0, 0);
    });
  } catch (const dpt::Timeout& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("for rank 3, which did not call it") != std::string::npos);
  CHECK(seconds_since(start) < timeout + 3.0);
}

TEST_CASE("split: a group member missing from a group collective is named in both numberings", "[faults]") {
  const double timeout = 0.5;
  std::string message;
  try {
    dpt::launch(threads(4, timeout), [&](Context& ctx) {
      auto row = ctx.comm.split(ctx.rank / 2, 0);  // {0,1}, {2,3}
      if (ctx.rank == 3) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return;
      }
      if (ctx.rank == 2) row->barrier();
    });
  } catch (const dpt::Timeout& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("rank 0 (world rank 2) waited") != std::string::npos);
  CHECK(message.find("for rank 1 (world rank 3), which did not call it") != std::string::npos);
  CHECK(message.find("ranks 0..1 are world ranks 2, 3") != std::string::npos);
}

TEST_CASE("split: a message nobody received in a group is reported when the ranks end, in both numberings",
          "[faults]") {
  for (bool nested : {false, true}) {
    std::string message;
    try {
      dpt::launch(threads(4), [&](Context& ctx) {
        auto row = ctx.comm.split(ctx.rank / 2, 0);  // {0,1}, {2,3}
        auto group = nested ? row->split(0, 0) : std::move(row);
        float x = 1;
        if (ctx.rank == 2) group->send(&x, 1, 1, 7);  // to world rank 3, which never receives it
        group->barrier();
      });
    } catch (const dpt::Error& e) {
      message = e.what();
    }
    INFO((nested ? "a group of a group: " : "a group: ") << message);
    CHECK(message.find("never received") != std::string::npos);
    CHECK(message.find("rank 0 (world rank 2) sent 1 message(s)") != std::string::npos);
    CHECK(message.find("to rank 1 (world rank 3) (tag 7, in a sub-communicator)") != std::string::npos);
  }
}

TEST_CASE("split: a negative color is an error that says what a color is") {
  std::string message;
  try {
    dpt::launch(threads(2), [](Context& ctx) { ctx.comm.split(-1, 0); });
  } catch (const dpt::Error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("color must be >= 0") != std::string::npos);
}
