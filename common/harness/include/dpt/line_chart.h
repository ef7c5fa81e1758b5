/// @file line_chart.h
/// @brief A line chart as SVG text: a few named series of (x, y) points,
/// linear or logarithmic axes, a legend. For the chapters' curves (loss
/// against steps; steps against batch size).
///
///     dpt::LineChart chart{"ch14: loss", "step", "nats per character"};
///     chart.series.push_back({"train", "#4a7fb0", {{1, 4.1}, {2, 3.9}}});
///     dpt::write_output_file("loss.svg", dpt::svg(chart));
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dpt {

/// One curve of a chart.
struct ChartSeries {
  std::string name;                                ///< the legend's label
  std::string colour = "#4a7fb0";                  ///< SVG colour
  std::vector<std::pair<double, double>> points;   ///< (x, y), drawn in order; non-finite points are skipped
  bool dashed = false;                             ///< a reference line rather than a measurement
  bool markers = false;                            ///< a dot at every point (`<circle class="marker"
                                                   ///< data-series=NAME data-x=X data-y=Y …>`, for tests)
};

/// A shaded stretch of the x axis, from the frame's left edge to `x_hi`, with
/// a line and `label` at its right edge (a region of the plot, or a threshold).
struct ChartBand {
  double x_hi = 0;                   ///< its right edge, in data units (clamped to the frame)
  std::string label;                 ///< written beside the edge line
  std::string colour = "#e8f4e8";    ///< the fill; the edge line and label take `edge`
  std::string edge = "#2a7a2a";      ///< the edge line's and label's colour
};

/// A chart: title, axis labels, series.
struct LineChart {
  std::string title;                ///< above the frame
  std::string x_label;              ///< under the x axis
  std::string y_label;              ///< beside the y axis
  std::vector<ChartSeries> series;  ///< drawn in order, listed in the legend
  bool log_x = false;               ///< logarithmic x axis (every x > 0)
  bool log_y = false;               ///< logarithmic y axis (every y > 0)
  std::vector<ChartBand> bands;     ///< drawn under the series (`<rect class="band" data-x-hi=X …>`)
  std::string note;                 ///< a line under the x axis's label (what the legend has no room for)
};

/// The chart as a standalone SVG document (640 × 400).
std::string svg(const LineChart& chart);

}  // namespace dpt
