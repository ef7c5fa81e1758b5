// ch08_run.h — chapter 08's tests run an algorithm on a threads world and
// read what it did: each rank's vector afterwards, the messages a watching
// communicator saw, the traffic log; a deadlock fails saying why. With the
// exact serial sums (support/exact_sums.h) and powers of two.
#pragma once

#include "support/catch.h"
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ch08.h"
#include "dpt/comm/watch.h"
#include "support/exact_sums.h"
#include "support/ranks.h"

namespace dpt_test {

/// What an algorithm did on a threads world.
struct Run {
  std::vector<std::vector<float>> data;             ///< each rank's vector afterwards
  std::vector<std::vector<dpt::Message>> messages;  ///< each rank's calls, as watched
  std::vector<std::vector<int64_t>> traffic;        ///< bytes [src][dst]
};

using Fill = std::function<float(int rank, int64_t i)>;
using Body = std::function<void(dpt::Communicator&, std::vector<float>&)>;

/// Runs `body` on every rank of a `world`-rank threads world, each rank's
/// vector of `count` floats filled by `fill`, through a watching communicator.
/// A deadlock fails the test, naming `what` when given (the part that hung).
inline Run run(int world, int64_t count, const Fill& fill, const Body& body, const std::string& what = "") {
  Run out;
  out.data.resize(std::size_t(world));
  out.messages.resize(std::size_t(world));
  std::mutex mutex;
  try {
  dpt_test::run_ranks(world, [&](dpt::Context& ctx) {
    std::vector<float> data(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = fill(ctx.rank, i);
    auto watched = dpt::watch_messages(ctx.comm,
                                       [&](const dpt::Message& m) { out.messages[std::size_t(ctx.rank)].push_back(m); });
    body(*watched, data);
    ctx.comm.barrier();  // every send is logged before rank 0 reads the table
    std::lock_guard<std::mutex> lock(mutex);
    out.data[std::size_t(ctx.rank)] = data;
    if (ctx.is_root()) out.traffic = ctx.comm.traffic().matrix();
  }, 3.0);
  } catch (const dpt::Timeout& e) {
    FAIL(what << (what.empty() ? "" : ": ") << world << " ranks deadlocked: every rank waited for a peer that was waiting too. Partners must choose each "
         "other (when r exchanges with q at a step, q exchanges with r at that step), and a rank must not send "
         "first and receive after where its peer does the same (communicator.h, rendezvous). The timeout said: "
         << e.what());
  }
  return out;
}

inline bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }
inline int log2_of(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// Checks every rank holds the serial sum; says in words what is off.
inline void require_serial_sums(const Run& r, int world, int64_t count, const std::string& what) {
  for (int rank = 0; rank < world; ++rank)
    for (int64_t i = 0; i < count; ++i)
      if (r.data[std::size_t(rank)][std::size_t(i)] != float(serial_sum(world, i)))
        FAIL(what << ", " << world << " ranks, " << count << " floats: rank " << rank << "'s element " << i << " is "
                  << r.data[std::size_t(rank)][std::size_t(i)] << ", the sum over ranks is " << serial_sum(world, i)
                  << ": every rank must end with the sum of every rank's vector, each counted once");
}

// ----------------------------------------------------------------------------
// the parts a composed hole is built on: checked first, so that a composed
// hole's test names the broken part in the part's words

/// Fails the calling test naming halving_reduce_scatter or doubling_all_gather
/// when either breaks its postcondition on 2, 4 or 8 members (37 floats:
/// unequal blocks). halving_doubling_all_reduce is built on them; its own
/// tests would otherwise report their fault as its.
inline void require_halving_doubling_phases() {
  for (int p : {2, 4, 8}) {
    const int64_t count = 37;
    auto block_of = [&](int64_t i) {
      int b = 0;
      while (i >= dpt::ch08::block_range(count, p, b, b + 1).end) ++b;
      return b;
    };
    Run rs = run(p, count, [](int rank, int64_t) { return float(rank + 1); },
                 [](dpt::Communicator& c, std::vector<float>& d) {
                   dpt::ch08::halving_reduce_scatter(dpt::ch08::Team(c), d.data(), int64_t(d.size()));
                 }, "halving_reduce_scatter");
    const float total = float(p * (p + 1) / 2);
    for (int m = 0; m < p; ++m)
      for (int64_t i = 0; i < count; ++i)
        if (block_of(i) == m && rs.data[std::size_t(m)][std::size_t(i)] != total)
          FAIL("halving_reduce_scatter (exercises/08_collectives/halving_doubling.cpp) on " << p << " members left "
               << rs.data[std::size_t(m)][std::size_t(i)] << " in member " << m << "'s own block, not the sum "
               << total << ". This test's hole is built on it: its own test (\"halving_reduce_scatter: …\") says "
               "which property fails");
    Run ag = run(p, count, [&](int rank, int64_t i) { return block_of(i) == rank ? float(100 + i) : -1.0f; },
                 [](dpt::Communicator& c, std::vector<float>& d) {
                   dpt::ch08::doubling_all_gather(dpt::ch08::Team(c), d.data(), int64_t(d.size()));
                 }, "doubling_all_gather");
    for (int m = 0; m < p; ++m)
      for (int64_t i = 0; i < count; ++i)
        if (ag.data[std::size_t(m)][std::size_t(i)] != float(100 + i))
          FAIL("doubling_all_gather (exercises/08_collectives/halving_doubling.cpp) on " << p << " members left "
               << ag.data[std::size_t(m)][std::size_t(i)] << " in member " << m << "'s element " << i << ", not its "
               << "owner's final " << 100 + i << ". This test's hole is built on it: its own test "
               "(\"doubling_all_gather: …\") says which property fails");
  }
}

/// Fails the calling test naming halving_doubling_all_reduce (or, first, its
/// phases) when it does not sum on 1 … `up_to` ranks: two_level_all_reduce
/// is built on the team algorithms, and its tests would otherwise blame it.
inline void require_halving_doubling(int up_to) {
  require_halving_doubling_phases();
  for (int n = 1; n <= up_to; ++n) {
    Run r = run(n, 7, [](int rank, int64_t i) { return float(rank + 1 + i); },
                [](dpt::Communicator& c, std::vector<float>& d) {
                  dpt::ch08::halving_doubling_all_reduce(dpt::ch08::Team(c), d.data(), int64_t(d.size()));
                }, "halving_doubling_all_reduce");
    for (int rank = 0; rank < n; ++rank)
      for (int64_t i = 0; i < 7; ++i) {
        const float want = float(n * (n + 1) / 2 + n * i);
        if (r.data[std::size_t(rank)][std::size_t(i)] != want)
          FAIL("halving_doubling_all_reduce (exercises/08_collectives/halving_doubling.cpp) on " << n << " ranks left "
               << r.data[std::size_t(rank)][std::size_t(i)] << " in rank " << rank << "'s element " << i << ", not the "
               << "sum " << want << ". This test's hole is built on it: its own tests "
               "(\"halving_doubling_all_reduce: …\") say which property fails");
      }
  }
}

}  // namespace dpt_test
