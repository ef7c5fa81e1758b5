// ch04_phases.h — each phase of chapter 04's ring judged by its own
// postcondition (ch04.h), as a sentence when it fails. The phase tests use
// them, and every test of ring_all_reduce checks both phases first
// (REQUIRE_PHASES_HOLD), so a broken phase is reported in its own words.
#pragma once

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ch04.h"
#include "support/catch.h"
#include "support/ch04_ring.h"
#include "support/contributions.h"

namespace dpt_test {
// ----------------------------------------------------------------------------
// Each phase's postcondition (ch04.h), as a sentence when it fails ("" when it
// holds). The phase tests below judge a phase by these; the all-reduce's tests
// judge both phases first, so a broken phase is named in its own words and not
// in the all-reduce's (a broken all-gather is not a rounding of Avg).

using Phase = std::function<void(dpt::Communicator&, std::vector<float>&)>;

// Scatter-reduce on `count` floats, rank r's input its contribution in every element.
inline Phase scatter_reduce_phase() {
  return [](dpt::Communicator& comm, std::vector<float>& d) {
    std::fill(d.begin(), d.end(), dpt_test::contribution(comm.rank()));
    dpt::ch04::ring_scatter_reduce(comm, d.data(), int64_t(d.size()));
  };
}
inline std::string scatter_reduce_failure(const RingRun& run, int world, int64_t count) {
  for (int r = 0; r < world; ++r) {
    const int owned = (r + 1) % world;
    const dpt::Range chunk = dealt_chunk(count, world, owned);
    for (int64_t i = chunk.begin; i < chunk.end; ++i)
      if (run.data[r][i] != dpt_test::all_once(world)) {
        std::ostringstream out;
        out << world << " ranks, " << count << " floats: after scatter-reduce rank " << r << "'s chunk " << owned
            << " (the one it must own) holds " << dpt_test::contributions(run.data[r][i], world)
            << ". A partial sum must travel the whole ring, picking up each rank's contribution exactly once, and "
               "end on its owner.";
        return out.str();
      }
  }
  return "";
}

// All-gather on 8 floats: rank r's finished chunk (r+1) mod n holds
// 100·(chunk+1)+i; elsewhere rank r holds 10000·(rank+1) + i, which no
// finished value equals.
constexpr int64_t kGatherCount = 8;
inline float finished_value(int world, int64_t i) {
  for (int c = 0; c < world; ++c) {
    dpt::Range ch = dealt_chunk(kGatherCount, world, c);
    if (i >= ch.begin && i < ch.end) return float(100 * (c + 1) + i);
  }
  return -2.0f;
}
inline Phase all_gather_phase(int world) {
  return [world](dpt::Communicator& comm, std::vector<float>& d) {
    dpt::Range mine = dealt_chunk(kGatherCount, world, (comm.rank() + 1) % world);
    for (int64_t i = 0; i < kGatherCount; ++i)
      d[i] = (i >= mine.begin && i < mine.end) ? finished_value(world, i) : float(10000 * (comm.rank() + 1) + i);
    dpt::ch04::ring_all_gather(comm, d.data(), kGatherCount);
  };
}
inline std::string all_gather_failure(const RingRun& run, int world) {
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < kGatherCount; ++i) {
      float got = run.data[r][i], want = finished_value(world, i), stale = float(10000 * (r + 1) + i);
      if (got == want) continue;
      std::ostringstream out;
      out << world << " ranks: after all-gather rank " << r << " element " << i << " is " << got
          << ", the owner's finished value is " << want
          << (got == stale ? " (it never arrived: every chunk must reach every rank in n-1 steps)"
              : got == want + stale ? " (it was added to this rank's old value: all-gather copies, it does not add)"
                                    : " (a chunk other than the owner's finished one arrived there)");
      return out.str();
    }
  return "";
}

// Both phases on `world` ranks, by their own laws; "" when both hold.
inline std::string broken_phase(int world) {
  auto attempt = [&](const char* name, int64_t count, const Phase& phase,
                     const std::function<std::string(const RingRun&)>& law) -> std::string {
    try {
      std::string failed = law(run_ring(world, count, phase));
      return failed.empty() ? "" : std::string(name) + " breaks its own contract: " + failed;
    } catch (const dpt::NotImplemented&) {
      throw;
    } catch (const dpt::Error& e) {
      return std::string(name) + " stopped with an error: " + e.what();
    }
  };
  std::string failed = attempt("ring_scatter_reduce", 10, scatter_reduce_phase(),
                               [&](const RingRun& run) { return scatter_reduce_failure(run, world, 10); });
  if (failed.empty())
    failed = attempt("ring_all_gather", kGatherCount, all_gather_phase(world),
                     [&](const RingRun& run) { return all_gather_failure(run, world); });
  return failed;
}
}  // namespace dpt_test

// ring_all_reduce is built from the two phases: they are judged first, and a
// broken one is the failure's reason, in its own words.
#define REQUIRE_PHASES_HOLD(world)                                                                              \
  do {                                                                                                          \
    const std::string broken = dpt_test::broken_phase(world);                                                   \
    if (!broken.empty())                                                                                        \
      FAIL("ring_all_reduce is built from the two phases, and " << broken                                      \
                   << " (its own test says more; the all-reduce is judged once both phases hold)");             \
  } while (false)
