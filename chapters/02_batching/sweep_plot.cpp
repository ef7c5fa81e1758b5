// sweep_plot.cpp — the batch sweep's log-log SVG (sweep_plot.h). Plot frame
// 560 × 300 px at (70, 40); x = log2 B, y = log10 steps, both linear in px.
#include "sweep_plot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dpt::ch02 {

namespace {
constexpr double kLeft = 70, kTop = 40, kWidth = 560, kHeight = 300;

// The plot's axes: batch and steps ranges, both logarithmic.
struct Axes {
  double batch_lo, batch_hi, steps_lo, steps_hi;  // steps_lo/hi: decades
  double x(double batch) const { return kLeft + kWidth * std::log2(batch / batch_lo) / std::log2(batch_hi / batch_lo); }
  double y(double steps) const {
    return kTop + kHeight - kHeight * std::log10(steps / steps_lo) / std::log10(steps_hi / steps_lo);
  }
};

Axes axes_of(const SweepResult& sweep) {
  Axes a{double(sweep.points.front().batch), double(sweep.points.back().batch), 1e300, 0};
  for (const SweepPoint& p : sweep.points)
    for (int64_t s : {p.tuned_steps, p.linear_steps})
      if (s > 0) a.steps_lo = std::min(a.steps_lo, double(s)), a.steps_hi = std::max(a.steps_hi, double(s));
  if (a.steps_hi == 0) a.steps_lo = a.steps_hi = 1;  // nothing reached: an empty frame
  a.steps_lo = std::pow(10, std::floor(std::log10(a.steps_lo)));
  a.steps_hi = std::max(10 * a.steps_lo, std::pow(10, std::ceil(std::log10(a.steps_hi * 1.0001))));
  if (a.batch_hi <= a.batch_lo) a.batch_hi = 2 * a.batch_lo;
  return a;
}

// A polyline through the points with steps > 0, in order.
std::string polyline(const Axes& a, const std::vector<SweepPoint>& points, bool tuned, const char* style) {
  std::ostringstream line;
  line << "<polyline fill=\"none\" " << style << " points=\"";
  for (const SweepPoint& p : points) {
    const int64_t s = tuned ? p.tuned_steps : p.linear_steps;
    if (s > 0) line << a.x(double(p.batch)) << "," << a.y(double(s)) << " ";
  }
  line << "\"/>\n";
  return line.str();
}
}  // namespace

std::string sweep_svg(const SweepResult& sweep, const std::string& title) {
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"400\" font-family=\"sans-serif\" "
         "font-size=\"12\">\n<rect width=\"720\" height=\"400\" fill=\"white\"/>\n"
      << "<text x=\"360\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  if (sweep.points.empty()) return svg.str() + "</svg>\n";
  const Axes a = axes_of(sweep);
  svg << "<clipPath id=\"frame\"><rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kWidth << "\" height=\""
      << kHeight << "\"/></clipPath>\n";
  const Knee& k = sweep.knee;
  if (k.critical_batch > 0) {  // the region where doubling halves the steps, then the two asymptotes
    const double crit_x = std::clamp(a.x(k.critical_batch), kLeft, kLeft + kWidth);
    svg << "<rect class=\"perfect-region\" x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << crit_x - kLeft
        << "\" height=\"" << kHeight << "\" fill=\"#e8f4e8\"/>\n"
        << "<text x=\"" << kLeft + 6 << "\" y=\"" << kTop + kHeight - 8
        << "\" fill=\"#2a7a2a\">doubling the batch halves the steps</text>\n"
        << "<g clip-path=\"url(#frame)\"><line class=\"perfect-scaling\" x1=\"" << a.x(a.batch_lo) << "\" y1=\""
        << a.y(k.min_samples / a.batch_lo) << "\" x2=\"" << a.x(a.batch_hi) << "\" y2=\"" << a.y(k.min_samples / a.batch_hi)
        << "\" stroke=\"gray\" stroke-dasharray=\"6 4\"/>\n"
        << "<line class=\"floor\" x1=\"" << kLeft << "\" y1=\"" << a.y(k.min_steps) << "\" x2=\"" << kLeft + kWidth
        << "\" y2=\"" << a.y(k.min_steps) << "\" stroke=\"gray\" stroke-dasharray=\"2 3\"/></g>\n"
        << "<line class=\"critical-batch\" x1=\"" << crit_x << "\" y1=\"" << kTop << "\" x2=\"" << crit_x << "\" y2=\""
        << kTop + kHeight << "\" stroke=\"#2a7a2a\"/>\n"
        << "<text x=\"" << crit_x + 4 << "\" y=\"" << kTop + 14 << "\" fill=\"#2a7a2a\">critical batch ~ "
        << std::lround(k.critical_batch) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double b = a.batch_lo; b <= a.batch_hi * 1.0001; b *= 2)
    svg << "<text x=\"" << a.x(b) << "\" y=\"" << kTop + kHeight + 16 << "\" text-anchor=\"middle\">" << std::lround(b)
        << "</text>\n";
  for (double s = a.steps_lo; s <= a.steps_hi * 1.0001; s *= 10)
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << a.y(s) + 4 << "\" text-anchor=\"end\">" << std::lround(s) << "</text>\n";
  svg << "<text x=\"" << kLeft + kWidth / 2 << "\" y=\"" << kTop + kHeight + 34
      << "\" text-anchor=\"middle\">global batch B (log)</text>\n"
      << "<text x=\"18\" y=\"" << kTop + kHeight / 2 << "\" transform=\"rotate(-90 18 " << kTop + kHeight / 2
      << ")\" text-anchor=\"middle\">steps to the target (log)</text>\n"
      << polyline(a, sweep.points, true, "stroke=\"#1f77b4\" stroke-width=\"2\"")
      << polyline(a, sweep.points, false, "stroke=\"#ff7f0e\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"");
  for (const SweepPoint& p : sweep.points) {
    const double x = a.x(double(p.batch));
    if (p.tuned_steps > 0)
      svg << "<circle class=\"tuned\" data-batch=\"" << p.batch << "\" data-steps=\"" << p.tuned_steps << "\" cx=\"" << x
          << "\" cy=\"" << a.y(double(p.tuned_steps)) << "\" r=\"4\" fill=\"#1f77b4\"/>\n";
    if (p.linear_steps > 0)
      svg << "<rect class=\"linear\" data-batch=\"" << p.batch << "\" data-steps=\"" << p.linear_steps << "\" x=\"" << x - 4
          << "\" y=\"" << a.y(double(p.linear_steps)) - 4 << "\" width=\"8\" height=\"8\" fill=\"white\" stroke=\"#ff7f0e\" "
          << "stroke-width=\"2\"/>\n";
    else if (p.linear_diverged)
      svg << "<text class=\"diverged\" data-batch=\"" << p.batch << "\" x=\"" << x << "\" y=\"" << kTop + 12
          << "\" text-anchor=\"middle\" fill=\"#ff7f0e\">x</text>\n";
  }
  svg << "<text x=\"" << kLeft + kWidth - 8 << "\" y=\"" << kTop + kHeight - 26 << "\" text-anchor=\"end\">"
      << "<tspan fill=\"#1f77b4\">&#9679; rate tuned per batch</tspan>  <tspan fill=\"#ff7f0e\">&#9633; linear rule + "
         "warm-up (x: diverged)</tspan></text>\n"
      << "<text x=\"" << kLeft + kWidth - 8 << "\" y=\"" << kTop + kHeight - 10 << "\" text-anchor=\"end\" fill=\"gray\">"
      << "dashed: perfect scaling E_min/B; dotted: S_min</text>\n</svg>\n";
  return svg.str();
}

}  // namespace dpt::ch02
