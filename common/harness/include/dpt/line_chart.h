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
  bool markers = false;                            ///< a dot at every point
};

/// A chart: title, axis labels, series.
struct LineChart {
  std::string title;                ///< above the frame
  std::string x_label;              ///< under the x axis
  std::string y_label;              ///< beside the y axis
  std::vector<ChartSeries> series;  ///< drawn in order, listed in the legend
  bool log_x = false;               ///< logarithmic x axis (every x > 0)
  bool log_y = false;               ///< logarithmic y axis (every y > 0)
};

/// The chart as a standalone SVG document (640 × 400).
std::string svg(const LineChart& chart);

}  // namespace dpt
