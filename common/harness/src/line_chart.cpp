// line_chart.cpp — a line chart as SVG (line_chart.h).
#include "dpt/line_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace dpt {

namespace {
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// An axis: data range → pixels, linear or log10.
struct Axis {
  double lo = 0, hi = 1, from = 0, to = 1;
  bool log = false;
  double at(double v) const {
    double a = log ? std::log10(v) : v, l = log ? std::log10(lo) : lo, h = log ? std::log10(hi) : hi;
    return from + (to - from) * (h > l ? (a - l) / (h - l) : 0.5);
  }
  // About five round values inside [lo, hi] (on a log axis: powers of ten, or 1-2-5 steps).
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {  // powers of ten; 1, 2, 5 times them where that gives fewer than three
      for (const std::vector<double>& mantissas : {std::vector<double>{1}, std::vector<double>{1, 2, 5}}) {
        out.clear();
        for (double p = std::floor(std::log10(lo)); p <= std::ceil(std::log10(hi)); ++p)
          for (double m : mantissas)
            if (double v = m * std::pow(10.0, p); v >= lo * 0.999 && v <= hi * 1.001) out.push_back(v);
        if (out.size() >= 3) break;
      }
      return out;
    }
    double raw = (hi - lo) / 5, step = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (step * m >= raw) { step *= m; break; }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
    return out;
  }
};

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }
}  // namespace

std::string svg(const LineChart& chart) {
  const double left = 70, top = 40, width = 520, height = 290;
  Axis x{std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(), left, left + width, chart.log_x};
  Axis y{std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(), top + height, top, chart.log_y};
  for (const ChartSeries& s : chart.series)
    for (auto [px, py] : s.points)
      if (usable(px, x.log) && usable(py, y.log)) {
        x.lo = std::min(x.lo, px), x.hi = std::max(x.hi, px);
        y.lo = std::min(y.lo, py), y.hi = std::max(y.hi, py);
      }
  if (x.lo > x.hi) x.lo = 0, x.hi = 1;
  if (y.lo > y.hi) y.lo = 0, y.hi = 1;
  if (!y.log) {  // a little room above and below the curves
    const double pad = (y.hi - y.lo) * 0.05 + 1e-12;
    y.lo -= pad, y.hi += pad;
  }
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"400\" font-family=\"sans-serif\" "
         "font-size=\"12\">\n<rect width=\"640\" height=\"400\" fill=\"white\"/>\n"
      << "<text x=\"320\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << escaped(chart.title) << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (const ChartBand& b : chart.bands) {  // under everything else
    const double edge = std::clamp(usable(b.x_hi, x.log) ? x.at(b.x_hi) : left, left, left + width);
    out << "<rect class=\"band\" data-x-hi=\"" << b.x_hi << "\" x=\"" << left << "\" y=\"" << top << "\" width=\""
        << edge - left << "\" height=\"" << height << "\" fill=\"" << b.colour << "\"/>\n"
        << "<line x1=\"" << edge << "\" x2=\"" << edge << "\" y1=\"" << top << "\" y2=\"" << top + height
        << "\" stroke=\"" << b.edge << "\"/>\n<text x=\"" << edge + 4 << "\" y=\"" << top + height - 8 << "\" fill=\""
        << b.edge << "\">" << escaped(b.label) << "</text>\n";
  }
  for (double t : x.ticks())
    out << "<text x=\"" << x.at(t) << "\" y=\"" << top + height + 16 << "\" text-anchor=\"middle\">" << t << "</text>\n";
  for (double t : y.ticks())
    out << "<text x=\"" << left - 6 << "\" y=\"" << y.at(t) + 4 << "\" text-anchor=\"end\">" << t << "</text>\n"
        << "<line x1=\"" << left << "\" x2=\"" << left + width << "\" y1=\"" << y.at(t) << "\" y2=\"" << y.at(t)
        << "\" stroke=\"#eee\"/>\n";
  out << "<text x=\"" << left + width / 2 << "\" y=\"" << top + height + 36 << "\" text-anchor=\"middle\">"
      << escaped(chart.x_label) << "</text>\n"
      << "<text x=\"18\" y=\"" << top + height / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
      << top + height / 2 << ")\">" << escaped(chart.y_label) << "</text>\n";
  if (!chart.note.empty())
    out << "<text class=\"note\" x=\"320\" y=\"" << top + height + 56 << "\" text-anchor=\"middle\" font-size=\"11\" "
        << "fill=\"#555\">" << escaped(chart.note) << "</text>\n";
  double legend_y = top + 14;
  for (const ChartSeries& s : chart.series) {
    out << "<polyline fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (auto [px, py] : s.points)
      if (usable(px, x.log) && usable(py, y.log)) out << x.at(px) << "," << y.at(py) << " ";
    out << "\"/>\n";
    if (s.markers)
      for (auto [px, py] : s.points)
        if (usable(px, x.log) && usable(py, y.log))
          out << "<circle class=\"marker\" data-series=\"" << escaped(s.name) << "\" data-x=\"" << px
              << "\" data-y=\"" << py << "\" cx=\"" << x.at(px) << "\" cy=\"" << y.at(py) << "\" r=\"3\" fill=\"" << s.colour << "\"/>\n";
    out << "<line x1=\"" << left + width - 150 << "\" x2=\"" << left + width - 126 << "\" y1=\"" << legend_y - 4
        << "\" y2=\"" << legend_y - 4 << "\" stroke=\"" << s.colour << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>\n"
        << "<text x=\"" << left + width - 120 << "\" y=\"" << legend_y << "\">" << escaped(s.name) << "</text>\n";
    legend_y += 16;
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace dpt
