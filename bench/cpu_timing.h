// cpu_timing.h — how the CPU benches time a piece of work: windows of many
// calls after a warm-up, several windows interleaved, the median kept
// (bench_mlp_step, bench_gpt_step). GPU benches use gpu_timing.h's events.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "dpt/report.h"  // seconds_since

namespace dpt_bench {

/// Something to time: fn() is called for `window` seconds per repeat.
struct Workload {
  std::function<void()> fn;
  double window = 0;             ///< seconds per timing window
  std::vector<double> per_call;  ///< seconds per call, one entry per window
  /// The median window's seconds per call.
  double median() {
    std::nth_element(per_call.begin(), per_call.begin() + per_call.size() / 2, per_call.end());
    return per_call[per_call.size() / 2];
  }
};

/// Warms every workload up, then runs `repeats` rounds; each round times one
/// window of every workload in turn. Interleaving means a neighbour that slows
/// the machine down for a while slows all workloads alike, so their *ratios*
/// (step vs GEMMs) stay honest even when the absolute rates wobble.
inline void measure(const std::vector<Workload*>& workloads, int repeats) {
  using Clock = std::chrono::steady_clock;
  for (Workload* w : workloads) {
    auto start = Clock::now();
    do w->fn();
    while (dpt::seconds_since(start) < std::min(0.05, w->window));
  }
  for (int r = 0; r < repeats; ++r)
    for (Workload* w : workloads) {
      auto start = Clock::now();
      int64_t calls = 0;
      double elapsed = 0;
      do {
        w->fn();
        ++calls;
        elapsed = dpt::seconds_since(start);
      } while (elapsed < w->window);
      w->per_call.push_back(elapsed / double(calls));
    }
}

}  // namespace dpt_bench
