// gantt.cpp — one step across ranks as an SVG Gantt chart (gantt.h).
#include "dpt/gantt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "dpt/check.h"

namespace dpt {

namespace {
constexpr GanttKind kGanttKinds[] = {GanttKind::Forward,      GanttKind::Backward,     GanttKind::Compute,
                                     GanttKind::TpCollective, GanttKind::DpCollective, GanttKind::PpTransfer,
                                     GanttKind::Comm};

const char* gantt_colour(GanttKind kind) {
  switch (kind) {
    case GanttKind::Forward: return "#4a7fb0";       // chapter 13's forward blue
    case GanttKind::Backward: return "#d0652a";      // and its backward orange
    case GanttKind::Compute: return "#9a9a9a";
    case GanttKind::TpCollective: return "#2a9d4a";
    case GanttKind::DpCollective: return "#8e44ad";
    case GanttKind::PpTransfer: return "#c0392b";
    case GanttKind::Comm: return "#d4a017";
  }
  return "#000000";
}

const char* gantt_legend(GanttKind kind) {
  switch (kind) {
    case GanttKind::Forward: return "forward";
    case GanttKind::Backward: return "backward";
    case GanttKind::Compute: return "other compute";
    case GanttKind::TpCollective: return "TP collective";
    case GanttKind::DpCollective: return "DP collective";
    case GanttKind::PpTransfer: return "PP send/recv";
    case GanttKind::Comm: return "other communication";
  }
  return "";
}

std::string gantt_escaped(const std::string& text) {
  std::string out;
  for (char c : text)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
  return out;
}

// A round step for about five ticks over `span` milliseconds.
double gantt_tick_step(double span) {
  const double raw = span / 5, step = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (step * m >= raw) return step * m;
  return step * 10;
}

void check_gantt_bars(const GanttChart& chart) {
  const int ranks = int(chart.stage_of_rank.size());
  DPT_CHECK(ranks > 0, "gantt: the chart has no ranks (stage_of_rank is empty)");
  std::vector<std::vector<const GanttSpan*>> rows(static_cast<std::size_t>(ranks));
  for (const GanttSpan& s : chart.spans) {
    DPT_CHECK(s.rank >= 0 && s.rank < ranks,
              "gantt: bar \"" << s.label << "\" is on rank " << s.rank << ", but the chart has " << ranks << " ranks");
    DPT_CHECK(std::isfinite(s.start) && std::isfinite(s.end) && s.end >= s.start,
              "gantt: bar \"" << s.label << "\" on rank " << s.rank << " ends (" << s.end << " s) before it starts ("
                              << s.start << " s)");
    rows[std::size_t(s.rank)].push_back(&s);
  }
  for (auto& row : rows) {
    std::sort(row.begin(), row.end(), [](const GanttSpan* a, const GanttSpan* b) { return a->start < b->start; });
    for (std::size_t i = 1; i < row.size(); ++i)
      DPT_CHECK(row[i]->start >= row[i - 1]->end - 1e-12,
                "gantt: on rank " << row[i]->rank << ", \"" << row[i]->label << "\" starts before \""
                                  << row[i - 1]->label << "\" ends: one rank's bars must not overlap");
  }
}
}  // namespace

const char* gantt_kind_name(GanttKind kind) {
  switch (kind) {
    case GanttKind::Forward: return "forward";
    case GanttKind::Backward: return "backward";
    case GanttKind::Compute: return "compute";
    case GanttKind::TpCollective: return "tp";
    case GanttKind::DpCollective: return "dp";
    case GanttKind::PpTransfer: return "pp";
    case GanttKind::Comm: return "comm";
  }
  return "";
}

bool is_compute(GanttKind kind) {
  return kind == GanttKind::Forward || kind == GanttKind::Backward || kind == GanttKind::Compute;
}

std::string svg(const GanttChart& chart) {
  check_gantt_bars(chart);
  double t0 = std::numeric_limits<double>::max(), t1 = -std::numeric_limits<double>::max();
  for (const GanttSpan& s : chart.spans) t0 = std::min(t0, s.start), t1 = std::max(t1, s.end);
  if (t0 > t1) t0 = 0, t1 = 1e-3;
  const double span_ms = std::max((t1 - t0) * 1e3, 1e-6);
  // Rows: ranks in stage order, each stage under a header row.
  std::map<int, std::vector<int>> stages;
  for (int r = 0; r < int(chart.stage_of_rank.size()); ++r) stages[chart.stage_of_rank[std::size_t(r)]].push_back(r);
  const double left = 90, width = 760, notes = 240, row_h = 22, top = 60;
  const double height = top + row_h * double(chart.stage_of_rank.size() + stages.size()) + 60;
  auto x_of = [&](double seconds) { return left + width * (seconds - t0) * 1e3 / span_ms; };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + notes << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << (left + width) / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">"
      << gantt_escaped(chart.title) << "</text>\n<g class=\"legend\">\n";
  double legend_x = left;
  for (GanttKind kind : kGanttKinds) {
    out << "<rect class=\"key\" data-kind=\"" << gantt_kind_name(kind) << "\" x=\"" << legend_x << "\" y=\"32\" "
        << "width=\"10\" height=\"10\" fill=\"" << gantt_colour(kind) << "\"/><text x=\"" << legend_x + 14
        << "\" y=\"41\">" << gantt_legend(kind) << "</text>\n";
    legend_x += 20 + 6.2 * double(std::string(gantt_legend(kind)).size());
  }
  out << "</g>\n";
  double y = top;
  for (const auto& [stage, ranks] : stages) {
    out << "<g class=\"stage\" data-stage=\"" << stage << "\">\n<text x=\"4\" y=\"" << y + 15
        << "\" font-weight=\"bold\">stage " << stage << "</text>\n";
    y += row_h;
    for (int r : ranks) {
      out << "<g class=\"row\" data-rank=\"" << r << "\" data-stage=\"" << stage << "\">\n<text x=\"14\" y=\""
          << y + 15 << "\">rank " << r << "</text>\n<rect x=\"" << left << "\" y=\"" << y + 2 << "\" width=\"" << width
          << "\" height=\"" << row_h - 4 << "\" fill=\"#f4f4f4\"/>\n";
      for (const GanttSpan& s : chart.spans) {
        if (s.rank != r) continue;
        const double x = x_of(s.start), w = std::max(0.5, x_of(s.end) - x);
        out << "<rect class=\"bar\" data-rank=\"" << r << "\" data-kind=\"" << gantt_kind_name(s.kind)
            << "\" data-start-ms=\"" << (s.start - t0) * 1e3 << "\" data-end-ms=\"" << (s.end - t0) * 1e3
            << "\" x=\"" << x << "\" y=\"" << y + 2 << "\" width=\"" << w << "\" height=\"" << row_h - 4
            << "\" fill=\"" << gantt_colour(s.kind) << "\"><title>" << gantt_escaped(s.label) << ": "
            << (s.end - s.start) * 1e3 << " ms</title></rect>\n";
      }
      if (std::size_t(r) < chart.rank_notes.size() && !chart.rank_notes[std::size_t(r)].empty())
        out << "<text class=\"note\" x=\"" << left + width + 8 << "\" y=\"" << y + 15 << "\">"
            << gantt_escaped(chart.rank_notes[std::size_t(r)]) << "</text>\n";
      out << "</g>\n";
      y += row_h;
    }
    out << "</g>\n";
  }
  // The time axis, in milliseconds from the first bar's start.
  out << "<line x1=\"" << left << "\" x2=\"" << left + width << "\" y1=\"" << y + 4 << "\" y2=\"" << y + 4
      << "\" stroke=\"#888\"/>\n";
  const double step = gantt_tick_step(span_ms);
  for (double t = 0; t <= span_ms + step * 1e-9; t += step)
    out << "<text class=\"tick\" x=\"" << x_of(t0 + t / 1e3) << "\" y=\"" << y + 18 << "\" text-anchor=\"middle\">"
        << t << "</text>\n";
  out << "<text x=\"" << left + width / 2 << "\" y=\"" << y + 34 << "\" text-anchor=\"middle\">time in the step (ms)</text>\n";
  if (!chart.note.empty())
    out << "<text class=\"note\" x=\"" << left << "\" y=\"" << y + 50 << "\">" << gantt_escaped(chart.note) << "</text>\n";
  out << "</svg>\n";
  return out.str();
}

}  // namespace dpt
