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
inline Run run(int world, int64_t count, const Fill& fill, const Body& body) {
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
    FAIL(world << " ranks deadlocked: every rank waited for a peer that was waiting too. Partners must choose each "
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

}  // namespace dpt_test
