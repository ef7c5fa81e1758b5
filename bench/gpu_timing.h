// gpu_timing.h — timing work on a GPU for the bench_gpu_* programs: GPU
// events around a window of many calls, after a warm-up, the median window
// of several. Workloads are measured in interleaved rounds, so a slow spell
// of a shared machine slows every workload alike.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dpt/gpu.h"

namespace dpt::bench {

/// Something to time: fn() queues work on the current stream of cuda:0.
struct Workload {
  Workload(std::string name_, std::function<void()> fn_) : name(std::move(name_)), fn(std::move(fn_)) {}
  std::string name;
  std::function<void()> fn;
  int calls = 1;                 ///< calls per timing window (set by measure)
  std::vector<double> per_call;  ///< seconds per call, one per window
  double median() const {
    std::vector<double> v = per_call;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }
};

/// Seconds per call of `calls` calls of fn, between two events on `stream`.
inline double time_window(gpu::Stream& stream, const std::function<void()>& fn, int calls) {
  gpu::Event start, stop;
  start.record(stream);
  for (int i = 0; i < calls; ++i) fn();
  stop.record(stream);
  stop.synchronize();
  return 1e-3 * double(stop.elapsed_ms_since(start)) / calls;
}

/// Warms each workload up, picks its calls per window (about `window_s`),
/// then runs `repeats` rounds of one window each.
inline void measure(const std::vector<Workload*>& workloads, int repeats, double window_s) {
  gpu::Stream& stream = gpu::current_stream(0);
  for (Workload* w : workloads) {
    for (int i = 0; i < 3; ++i) w->fn();
    const double once = time_window(stream, w->fn, 5);
    w->calls = int(std::clamp(window_s / std::max(once, 1e-7), 3.0, 20000.0));
  }
  for (int r = 0; r < repeats; ++r)
    for (Workload* w : workloads) w->per_call.push_back(time_window(stream, w->fn, w->calls));
}

}  // namespace dpt::bench
