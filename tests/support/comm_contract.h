// comm_contract.h — the communicator contract: one set of test bodies that
// every backend must pass (communicator.h's "rules every backend keeps").
//
//   tests/core/test_comm_threads.cpp  DPT_COMM_CONTRACT_TESTS("threads", ...) with 2, 3, 4 ranks
//   tests/mpi/test_comm_mpi.cpp       DPT_COMM_CONTRACT_TESTS("mpi", ...) under mpirun -np 2 and 4
//
// A body launches its ranks, and each rank only records what it saw into its
// slot of a per-rank vector (Catch2 assertions are not thread-safe, and an
// assertion between two launches could put MPI processes out of step). The
// checks run after launch() returns, for the ranks this process ran (all of
// them under threads, one under MPI).
//
// Oracles share no code with the backends: each rank's contribution is a
// small integer-valued function of (rank, index), so sums are exact in float
// whatever order a backend reduces in, and results compare exactly. A
// mismatch is summarised in one line (first differing index, the two values,
// how many differ), never a dump of 2^18 floats.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dpt/launch.h"
#include "dpt/report.h"
#include "support/catch.h"
#include "support/timeout_message.h"

namespace dpt_test {

/// A world the contract runs on: launch options and how many ranks they make.
struct ContractWorld {
  std::string name;            ///< "threads, 3 ranks", for INFO
  dpt::LaunchOptions options;  ///< comm, ranks
  int world = 1;               ///< number of ranks
};

/// "" when equal; else one line: how many differ, the first index and values.
inline std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << "got " << got.size() << " floats, expected " << want.size();
    return out.str();
  }
  int64_t differ = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Bit-level inequality, except that two NaNs never count as equal.
    if (!(got[i] == want[i])) {
      if (first < 0) first = int64_t(i);
      ++differ;
    }
  }
  if (differ == 0) return "";
  out << differ << " of " << got.size() << " floats differ; first at [" << first
      << "]: got " << got[first] << ", expected " << want[first];
  return out.str();
}

using dpt::seconds_since;  // the harness's (dpt/report.h): one clock reading for tests and chapters

namespace contract {

using dpt::Context;
using dpt::ReduceOp;

inline float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 101) - 50.0f; }

inline std::vector<float> contribution(int rank, int64_t count, int64_t offset = 0) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = value(rank, offset + i);
  return v;
}

// The serial oracle over ranks 0..n-1: sum (then / n for Avg) or max.
inline std::vector<float> serial_reduce(int n, int64_t count, int64_t offset, ReduceOp op) {
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) {
    float acc = value(0, offset + i);
    for (int r = 1; r < n; ++r)
      acc = op == ReduceOp::Max ? std::max(acc, value(r, offset + i)) : acc + value(r, offset + i);
    out[i] = op == ReduceOp::Avg ? acc / float(n) : acc;
  }
  return out;
}

inline dpt::LaunchOptions with_timeout(const ContractWorld& w, double timeout_s) {
  dpt::LaunchOptions o = w.options;
  o.timeout_s = timeout_s;
  return o;
}

// Runs `body` on every rank; returns launch()'s error message ("" if none).
template <class Body>
std::string launch_message(const dpt::LaunchOptions& o, Body&& body) {
  try {
    dpt::launch(o, body);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// ----------------------------------------------------------------------------
// point-to-point

inline void send_order(const ContractWorld& w) {
  std::vector<std::vector<float>> got(3);
  bool receiver_here = false;
  dpt::launch(with_timeout(w, 10), [&](Context& ctx) {
    std::vector<float> a = {1, 2}, b = {3, 4}, c = {5};
    if (ctx.rank == 0) {
      ctx.comm.send(a.data(), 2, 1, 0);
      ctx.comm.send(b.data(), 2, 1, 0);
      ctx.comm.send(c.data(), 1, 1, 9);
    } else if (ctx.rank == 1) {
      receiver_here = true;
      got[0].resize(1), got[1].resize(2), got[2].resize(2);
      ctx.comm.recv(got[0].data(), 1, 0, 9);  // tag 9 first although sent last: tags are separate queues
      ctx.comm.recv(got[1].data(), 2, 0, 0);
      ctx.comm.recv(got[2].data(), 2, 0, 0);
    }
  });
  if (!receiver_here) return;
  CHECK(got[0] == std::vector<float>{5});
  CHECK(got[1] == std::vector<float>{1, 2});
  CHECK(got[2] == std::vector<float>{3, 4});
}

inline void sendrecv_ring(const ContractWorld& w) {
  const int n = w.world;
  const int64_t count = 100003;  // far above every eager limit
  std::vector<std::string> diff(n, "not run");
  std::vector<char> ran(n, 0);  // not vector<bool>: its bits share bytes across ranks
  dpt::launch(with_timeout(w, 10), [&](Context& ctx) {
    ran[ctx.rank] = true;
    int right = (ctx.rank + 1) % n, left = (ctx.rank + n - 1) % n;
    std::vector<float> in(count);
    diff[ctx.rank] = "";
    for (int step = 0; step < 5 && diff[ctx.rank].empty(); ++step) {
      std::vector<float> out = contribution(ctx.rank, count, step);
      ctx.comm.sendrecv(out.data(), count, right, in.data(), count, left);
      diff[ctx.rank] = first_difference(in, contribution(left, count, step));
    }
  });
  for (int r = 0; r < n; ++r)
    if (ran[r]) CHECK(diff[r] == "");
}

// ----------------------------------------------------------------------------
// collectives against serial computations

inline void collectives(const ContractWorld& w) {
  const int n = w.world;
  for (int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t((1 << 18) + 3)}) {
    std::vector<std::vector<std::string>> diff(n);  // per rank: one line per failed check
    std::vector<char> ran(n, 0);  // not vector<bool>: its bits share bytes across ranks
    dpt::launch(with_timeout(w, 20), [&](Context& ctx) {
      const int me = ctx.rank;
      ran[me] = true;
      auto record = [&](const char* what, const std::vector<float>& got, const std::vector<float>& want) {
        std::string d = first_difference(got, want);
        if (!d.empty()) diff[me].push_back(std::string(what) + ": " + d);
      };
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        std::vector<float> data = contribution(me, count);
        ctx.comm.all_reduce(data.data(), count, op);
        record(dpt::reduce_op_name(op), data, serial_reduce(n, count, 0, op));
        std::vector<float> rows = contribution(me, count * n), mine(count, -1);
        ctx.comm.reduce_scatter(rows.data(), mine.data(), count, op);
        record("reduce_scatter", mine, serial_reduce(n, count, me * count, op));
      }
      std::vector<float> expected;
      for (int r = 0; r < n; ++r) {
        auto part = contribution(r, count);
        expected.insert(expected.end(), part.begin(), part.end());
      }
      std::vector<float> mine = contribution(me, count), all(count * n, -1), in_place(count * n, -1);
      ctx.comm.all_gather(mine.data(), all.data(), count);
      record("all_gather", all, expected);
      std::copy(mine.begin(), mine.end(), in_place.begin() + me * count);
      ctx.comm.all_gather(in_place.data() + me * count, in_place.data(), count);
      record("all_gather in place", in_place, expected);
      for (int root = 0; root < n; ++root) {
        std::vector<float> data = contribution(me, count);
        ctx.comm.broadcast(data.data(), count, root);
        record("broadcast", data, contribution(root, count));
      }
      ctx.comm.barrier();
    });
    for (int r = 0; r < n; ++r) {
      if (!ran[r]) continue;
      INFO("rank " << r << ", count " << count);
      CHECK(diff[r] == std::vector<std::string>{});
    }
  }
}

inline void barrier_waits_for_all(const ContractWorld& w) {
  // Rank r arrives r*50 ms late; nobody may leave before the last arrives.
  // Judged on one clock (steady_clock: CLOCK_MONOTONIC, shared by every
  // process of a machine), each rank's leaving time against every rank's
  // arriving time, so a rank descheduled anywhere (a loaded machine) cannot
  // make a correct barrier look early, as timing each rank from its own start did.
  const int n = w.world;
  std::vector<double> leave_minus_last_arrival(n, -1);
  std::vector<char> ran(n, 0);  // not vector<bool>: its bits share bytes across ranks
  auto now_s = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  dpt::launch(with_timeout(w, 10), [&](Context& ctx) {
    ran[ctx.rank] = true;
    ctx.comm.barrier();  // a common start
    std::this_thread::sleep_for(std::chrono::milliseconds(50 * ctx.rank));
    double arrived = now_s();
    ctx.comm.barrier();
    double left = now_s();
    // A double as two floats (high part, remainder): exact to ~1e-14 s of uptime.
    float mine[2] = {float(arrived), float(arrived - double(float(arrived)))};
    std::vector<float> all(2 * std::size_t(ctx.world));
    ctx.comm.all_gather(mine, all.data(), 2);
    double last = 0;
    for (int r = 0; r < ctx.world; ++r) last = std::max(last, double(all[2 * r]) + double(all[2 * r + 1]));
    leave_minus_last_arrival[ctx.rank] = left - last;
  });
  for (int r = 0; r < n; ++r)
    if (ran[r]) {
      INFO("rank " << r << " left the barrier " << leave_minus_last_arrival[r] << " s after the last rank arrived");
      CHECK(leave_minus_last_arrival[r] >= -1e-6);  // the two floats' rounding, nothing more
    }
}

// ----------------------------------------------------------------------------
// errors: mismatches, timeouts, a failing peer

inline void count_mismatches_name_both_sides(const ContractWorld& w) {
  std::string p2p = launch_message(with_timeout(w, 10), [](Context& ctx) {
    std::vector<float> buf(8);
    if (ctx.rank == 0) ctx.comm.send(buf.data(), 4, 1);
    if (ctx.rank == 1) ctx.comm.recv(buf.data(), 8, 0);
  });
  INFO(p2p);
  CHECK(p2p.find("4 floats") != std::string::npos);
  CHECK(p2p.find("8 floats") != std::string::npos);
  CHECK(p2p.find("exactly the count") != std::string::npos);

  auto collective = [&](auto&& call) {
    return launch_message(with_timeout(w, 10), [&](Context& ctx) {
      std::vector<float> buf(64);
      call(ctx, buf.data());
    });
  };
  std::string counts = collective([](Context& ctx, float* buf) {
    ctx.comm.all_reduce(buf, 10 + 2 * ctx.rank, ReduceOp::Sum);
  });
  std::string roots = collective([](Context& ctx, float* buf) { ctx.comm.broadcast(buf, 4, ctx.rank % 2); });
  std::string ops = collective([](Context& ctx, float* buf) {
    ctx.comm.all_reduce(buf, 4, ctx.rank == 0 ? ReduceOp::Max : ReduceOp::Sum);
  });
  std::string calls = collective([](Context& ctx, float* buf) {
    if (ctx.rank == 0) ctx.comm.barrier();
    else ctx.comm.broadcast(buf, 4, 0);
  });
  INFO(counts);
  CHECK(counts.find("different counts (rank 0: 10, rank 1: 12") != std::string::npos);
  INFO(roots);
  CHECK(roots.find("different roots (rank 0: 0, rank 1: 1") != std::string::npos);
  INFO(ops);
  CHECK(ops.find("different reductions (rank 0: max, rank 1: sum") != std::string::npos);
  INFO(calls);
  CHECK(calls.find("different collectives at the same point (rank 0: barrier, rank 1: broadcast") != std::string::npos);
}

inline void deadlock_times_out_naming_ranks(const ContractWorld& w) {
  const int n = w.world;
  const double timeout = 0.5;
  auto start = std::chrono::steady_clock::now();
  std::string message = launch_message(with_timeout(w, timeout), [&](Context& ctx) {
    float x = 0;
    ctx.comm.recv(&x, 1, (ctx.rank + n - 1) % n);  // everyone receives from its left; nobody sends
  });
  double elapsed = seconds_since(start);
  INFO(message);
  CHECK(elapsed >= timeout * 0.9);  // it did wait (10% for clock skew between processes)
  CHECK(elapsed < timeout + 5.0);   // and did not hang
  int waiting = -1, on = -1;
  CHECK(parse_wait(message, &waiting, &on));
  CHECK(on == (waiting + n - 1) % n);
}

// Two ranks that both send first, then receive: fine below the eager limit,
// a deadlock above it (rendezvous), as under real MPI.
inline void unsafe_send_order(const ContractWorld& w, int64_t count, std::string* message) {
  *message = launch_message(with_timeout(w, 0.5), [&](Context& ctx) {
    if (ctx.rank > 1) return;
    int peer = 1 - ctx.rank;
    std::vector<float> out(count, float(ctx.rank)), in(count, -1);
    ctx.comm.send(out.data(), count, peer);
    ctx.comm.recv(in.data(), count, peer);
    DPT_CHECK(in[0] == float(peer), "rank " << ctx.rank << " received " << in[0]);
  });
}

inline void eager_below_rendezvous_above(const ContractWorld& w) {
  std::string small, large;
  unsafe_send_order(w, 100, &small);  // 400 B: below every eager limit (Open MPI shared memory: 4 KiB)
  auto start = std::chrono::steady_clock::now();
  unsafe_send_order(w, 1 << 20, &large);  // 4 MiB: above every eager limit
  double elapsed = seconds_since(start);
  INFO(small);
  CHECK(small == "");
  INFO(large);
  CHECK(large.find("waited 0.5 s in send to rank") != std::string::npos);
  CHECK(large.find("both ranks are sending, each waiting for the other to receive") != std::string::npos);  // the peer sends to it too: said so
  CHECK(elapsed < 5.5);
}

inline void failing_rank_stops_the_others(const ContractWorld& w) {
  const int n = w.world, failing = n - 1;
  std::vector<std::string> seen(n);
  std::vector<char> ran(n, 0);  // not vector<bool>: its bits share bytes across ranks
  auto start = std::chrono::steady_clock::now();
  std::string message = launch_message(with_timeout(w, 20), [&](Context& ctx) {
    ran[ctx.rank] = true;
    if (ctx.rank == failing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      DPT_FAIL("boom on purpose");
    }
    try {
      float x = 0;
      ctx.comm.recv(&x, 1, failing);  // it never sends
    } catch (const dpt::Error& e) {
      seen[ctx.rank] = e.what();
      throw;
    }
  });
  CHECK(seconds_since(start) < 5.0);  // far sooner than the 20 s timeout
  INFO(message);
  CHECK(message.find("boom on purpose") != std::string::npos);
  for (int r = 0; r < failing; ++r) {
    if (!ran[r]) continue;
    INFO("rank " << r << ": " << seen[r]);
    CHECK(seen[r].find("stopped because rank " + std::to_string(failing) + " failed") != std::string::npos);
    CHECK(seen[r].find("boom on purpose") != std::string::npos);
  }
}

}  // namespace contract
}  // namespace dpt_test

#define DPT_COMM_CONTRACT_CASE(label, worlds, body, title) \
  TEST_CASE(label " contract: " title) {                   \
    for (const dpt_test::ContractWorld& w : worlds()) {     \
      INFO(w.name);                                         \
      dpt_test::contract::body(w);                          \
    }                                                       \
  }

/// Defines the contract's test cases, named "<label> contract: ...", each run
/// on every world that `worlds()` returns.
#define DPT_COMM_CONTRACT_TESTS(label, worlds)                                                          \
  DPT_COMM_CONTRACT_CASE(label, worlds, send_order, "send/recv deliver exact values, in send order per tag") \
  DPT_COMM_CONTRACT_CASE(label, worlds, sendrecv_ring, "sendrecv around a ring delivers the left neighbour's data") \
  DPT_COMM_CONTRACT_CASE(label, worlds, collectives, "collectives (Sum, Avg, Max) equal serial computations, sizes 0 to 2^18") \
  DPT_COMM_CONTRACT_CASE(label, worlds, barrier_waits_for_all, "barrier returns only after every rank has arrived") \
  DPT_COMM_CONTRACT_CASE(label, worlds, count_mismatches_name_both_sides, "count, root, op and call mismatches are errors naming both sides") \
  DPT_COMM_CONTRACT_CASE(label, worlds, deadlock_times_out_naming_ranks, "a deadlock times out naming the waiting rank and its peer") \
  DPT_COMM_CONTRACT_CASE(label, worlds, eager_below_rendezvous_above, "send-then-recv passes below the eager limit and times out above it") \
  DPT_COMM_CONTRACT_CASE(label, worlds, failing_rank_stops_the_others, "a failing rank stops the others, which name it")
