// sweep.cpp — running the algorithms by name, recording their messages on a
// threads world, and the plot.
#include "sweep.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "ch08.h"
#include "dpt/check.h"
#include "dpt/launch.h"
#include "dpt/output_file.h"

namespace dpt::ch08 {

void run_algorithm(const std::string& name, Communicator& comm, float* data, int64_t count, int nodes) {
  Team world(comm);
  if (name == "ring") ring_all_reduce(world, data, count);
  else if (name == "recursive doubling") recursive_doubling_all_reduce(world, data, count);
  else if (name == "halving-doubling") halving_doubling_all_reduce(world, data, count);
  else if (name == "binomial tree") tree_all_reduce(world, data, count);
  else if (name == "two-level") two_level_all_reduce(comm, data, count, nodes);
  else DPT_FAIL("run_algorithm: no algorithm '" << name << "'");
}

Schedule record_schedule(const std::string& name, int ranks, int nodes) {
  Schedule seen(static_cast<std::size_t>(ranks));
  LaunchOptions options;
  options.ranks = ranks;
  options.timeout_s = 10;
  options.private_world = true;  // also from rank 0 of an mpirun job
  launch(options, [&](Context& ctx) {
    const int64_t count = kRecordedFloatsPerRank * ranks;
    std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
    auto watched = watch_messages(ctx.comm, [&](const Message& m) { seen[std::size_t(ctx.rank)].push_back(m); });
    run_algorithm(name, *watched, data.data(), count, nodes);
  });
  return seen;
}

std::vector<double> sweep_sizes() {
  std::vector<double> sizes;
  for (double s = 4; s <= 256.0 * 1024 * 1024; s *= 4) sizes.push_back(s);
  return sizes;
}

double clock_seconds(const Schedule& schedule, const Cluster& cluster, double bytes) {
  return replay(schedule, cluster, bytes / double(kRecordedFloatsPerRank * cluster.ranks));
}

std::size_t tuner_pick(const std::vector<std::string>& names, const Cluster& cluster, double bytes) {
  std::size_t picked = 0;
  for (std::size_t a = 1; a < names.size(); ++a)
    if (formula_seconds(names[a], cluster, bytes) < formula_seconds(names[picked], cluster, bytes)) picked = a;
  return picked;
}

Crossover sweep_crossover(const std::vector<std::string>& names, const Cluster& cluster, int max_ranks) {
  Crossover x;
  const int k = cluster.nodes;
  for (int n = std::max(2, k); n <= max_ranks; n += k) x.worlds.push_back(n);
  x.sizes = sweep_sizes();
  x.cells.assign(x.sizes.size(), std::vector<std::string>(x.worlds.size()));
  x.plot_seconds.assign(names.size(), std::vector<double>(x.sizes.size(), NAN));
  for (std::size_t w = 0; w < x.worlds.size(); ++w) {
    Cluster c = cluster;
    c.ranks = x.worlds[w];
    std::vector<Schedule> schedules;
    for (const std::string& name : names) schedules.push_back(record_schedule(name, c.ranks, k));
    for (std::size_t i = 0; i < x.sizes.size(); ++i) {
      std::size_t fastest = 0, picked = tuner_pick(names, c, x.sizes[i]);
      std::vector<double> clock(names.size());
      for (std::size_t a = 0; a < names.size(); ++a) {
        clock[a] = clock_seconds(schedules[a], c, x.sizes[i]);
        if (clock[a] < clock[fastest]) fastest = a;
        if (w + 1 == x.worlds.size()) x.plot_seconds[a][i] = clock[a];
      }
      char letter = algorithm_letter(names[fastest]);
      x.cells[i][w] = std::string(1, picked == fastest ? letter : char(std::tolower(letter)));
      ++x.total;
      x.hits += picked == fastest;
      x.close += clock[picked] <= 1.01 * clock[fastest];
    }
  }
  return x;
}

// ----------------------------------------------------------------------------
// the plot: a hand-written SVG, log10 axes, one polyline per algorithm

void write_plot(const std::string& path, const std::string& title, const std::vector<std::string>& names,
                const std::vector<double>& sizes, const std::vector<std::vector<double>>& seconds) {
  const double width = 720, height = 440, left = 70, right = 170, top = 40, bottom = 50;
  double lo = INFINITY, hi = 0;
  for (const auto& line : seconds)
    for (double t : line)
      if (t > 0) lo = std::min(lo, t), hi = std::max(hi, t);
  double y0 = std::floor(std::log10(lo)), y1 = std::ceil(std::log10(hi));
  if (y1 <= y0) y1 = y0 + 1;
  double x0 = std::log10(sizes.front()), x1 = std::log10(sizes.back());
  auto x = [&](double s) { return left + (std::log10(s) - x0) / (x1 - x0) * (width - left - right); };
  auto y = [&](double t) { return top + (y1 - std::log10(t)) / (y1 - y0) * (height - top - bottom); };
  static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};
  char buf[512];
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"440\" font-family=\"sans-serif\" "
                    "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"22\" font-size=\"14\">%s</text>\n", left, title.c_str());
  svg += buf;
  for (double e = y0; e <= y1; ++e) {  // horizontal grid: one line per decade of seconds
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><text x=\"%g\" y=\"%g\" "
                  "text-anchor=\"end\">1e%g s</text>\n",
                  left, y(std::pow(10, e)), width - right, y(std::pow(10, e)), left - 6, y(std::pow(10, e)) + 4, e);
    svg += buf;
  }
  const char* size_labels[] = {"4 B", "1 KiB", "256 KiB", "64 MiB"};
  for (int i = 0; i < 4; ++i) {  // vertical grid at 4 B, 1 KiB, 256 KiB, 64 MiB
    double s = 4 * std::pow(256.0, i);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><text x=\"%g\" y=\"%g\" "
                  "text-anchor=\"middle\">%s</text>\n",
                  x(s), top, x(s), height - bottom, x(s), height - bottom + 18, size_labels[i]);
    svg += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">all-reduce size S</text>\n",
                (left + width - right) / 2, height - 12);
  svg += buf;
  for (std::size_t a = 0; a < names.size(); ++a) {
    std::string points;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (seconds[a][i] > 0) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(sizes[i]), y(seconds[a][i]));
        points += buf;
      }
    if (points.empty()) continue;
    std::snprintf(buf, sizeof buf,
                  "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n"
                  "<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n",
                  colours[a % 5], points.c_str(), width - right + 10, top + 20.0 * double(a), colours[a % 5],
                  names[a].c_str());
    svg += buf;
  }
  svg += "</svg>\n";
  write_output_file(path, svg);
}

}  // namespace dpt::ch08
