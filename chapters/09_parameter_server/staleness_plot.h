// staleness_plot.h — chapter 09's picture of section 4: how many pushes were
// how stale, as an SVG bar chart a student opens in a browser (--plot).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt::ch09 {

/// Writes to `path` (atomically; "" writes nothing) a bar chart of the
/// number of pushes per staleness value 0 … max: filled bars for `measured`
/// (apply_push's record), outlines for `implied` (what the arrival order
/// implies). Both are per-push staleness lists.
void write_staleness_plot(const std::string& path, const std::string& title, const std::vector<int64_t>& measured,
                          const std::vector<int64_t>& implied);

}  // namespace dpt::ch09
