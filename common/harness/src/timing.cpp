// timing.cpp — the slowest-rank timer of chapter 04 and bench_allreduce.
#include "dpt/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "dpt/report.h"

namespace dpt {

double max_over_ranks(Communicator& comm, double value) {
  std::vector<float> all(std::size_t(comm.size()));
  float mine = float(value);
  comm.all_gather(&mine, all.data(), 1);
  double worst = 0;
  for (float t : all) {
    if (std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, double(t));
  }
  return worst;
}

double time_window(Communicator& comm, const std::function<void()>& fn, int64_t calls) {
  DPT_CHECK(calls >= 1, "time_window: " << calls << " calls; expected at least 1");
  comm.barrier();
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) fn();
  comm.barrier();  // waits for the last rank to finish its calls
  return max_over_ranks(comm, seconds_since(start)) / double(calls);
}

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace dpt
