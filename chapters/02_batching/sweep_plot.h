/// @file sweep_plot.h
/// @brief Chapter 02's batch-sweep plot (provided, not a hole): steps to the
/// target against the global batch on log-log axes, as a hand-written SVG.
///
/// Hand-written like ch10's accuracy plot, in a file of its own: the
/// harness's line chart (dpt/line_chart.h) is not on main yet; this plot
/// moves onto it when it is.
#pragma once

#include <string>

#include "batch_sweep.h"

namespace dpt::ch02 {

/// The SVG text of the sweep's plot, titled `title`: the tuned runs as filled
/// circles joined by a line (`<circle class="tuned" data-batch=B
/// data-steps=S …>`), the linear rule's as hollow squares (`class="linear"`,
/// a cross at the top edge where it diverged), the line of perfect scaling
/// through E_min (steps = E_min / B), the floor S_min, the region up to the
/// critical batch where doubling the batch halves the steps, shaded, and the
/// critical batch as a vertical line. Both axes logarithmic; x from the
/// smallest to the largest batch.
std::string sweep_svg(const SweepResult& sweep, const std::string& title);

}  // namespace dpt::ch02
