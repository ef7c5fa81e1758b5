// pipeline_clock.cpp — the replay, the bubble, the Gantt chart and its trace
// (pipeline_clock.h).
#include "pipeline_clock.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "dpt/check.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/trace.h"

namespace dpt::ch13 {

// ----------------------------------------------------------------------------
// the replay: each stage advances while its next op's input exists

Timeline replay_pipeline(const std::vector<std::vector<Op>>& schedules, const OpSeconds& seconds) {
  const int stages = int(schedules.size());
  Timeline timeline(schedules.size());
  // ended[{stage, pass, m}]: when that op ended (absent: not yet).
  std::map<std::tuple<int, int, int>, double> ended;
  auto key = [](int s, Pass p, int m) { return std::make_tuple(s, int(p), m); };
  // Which op must have ended before `op` may start on stage s.
  auto input_of = [&](int s, const Op& op) {
    if (op.pass == Pass::Forward) return s > 0 ? key(s - 1, Pass::Forward, op.micro_batch) : key(-1, Pass::Forward, 0);
    return s + 1 < stages ? key(s + 1, Pass::Backward, op.micro_batch) : key(s, Pass::Forward, op.micro_batch);
  };
  std::vector<std::size_t> next(schedules.size(), 0);
  std::vector<double> free_at(schedules.size(), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      while (next[std::size_t(s)] < schedules[std::size_t(s)].size()) {
        const Op& op = schedules[std::size_t(s)][next[std::size_t(s)]];
        auto need = input_of(s, op);
        double ready = 0;
        if (std::get<0>(need) >= 0) {
          auto it = ended.find(need);
          if (it == ended.end()) break;  // its input does not exist yet
          ready = it->second;
        }
        const double start = std::max(free_at[std::size_t(s)], ready), end = start + seconds(s, op);
        timeline[std::size_t(s)].push_back({op, start, end});
        ended[key(s, op.pass, op.micro_batch)] = free_at[std::size_t(s)] = end;
        ++next[std::size_t(s)];
        progress = true;
      }
  }
  std::string stuck;
  for (int s = 0; s < stages; ++s) {
    if (next[std::size_t(s)] == schedules[std::size_t(s)].size()) continue;
    const Op& op = schedules[std::size_t(s)][next[std::size_t(s)]];
    auto need = input_of(s, op);
    Op wanted{Pass(std::get<1>(need)), std::get<2>(need)};
    stuck += str(stuck.empty() ? "" : "; ", "stage ", s, " waits at ", op_name(op), " for ", op_name(wanted), " on stage ",
                 std::get<0>(need));
  }
  DPT_CHECK(stuck.empty(), "the schedules deadlock: " << stuck << " (no op of theirs can ever start)");
  return timeline;
}

double makespan(const Timeline& timeline) {
  double last = 0;
  for (const auto& stage : timeline)
    for (const Placed& p : stage) last = std::max(last, p.end);
  return last;
}

double busy_seconds(const Timeline& timeline, int stage) {
  double busy = 0;
  for (const Placed& p : timeline[std::size_t(stage)]) busy += p.end - p.start;
  return busy;
}

double bubble_fraction(const Timeline& timeline) {
  double busy = 0;
  for (int s = 0; s < int(timeline.size()); ++s) busy += busy_seconds(timeline, s);
  const double total = double(timeline.size()) * makespan(timeline);
  return total > 0 ? 1 - busy / total : 0;
}

double bubble_formula(int stages, int micro_batches) {
  return double(stages - 1) / double(micro_batches + stages - 1);
}

int slowest_stage(const Timeline& timeline) {
  int slowest = 0;
  for (int s = 1; s < int(timeline.size()); ++s)
    if (busy_seconds(timeline, s) > busy_seconds(timeline, slowest)) slowest = s;
  return slowest;
}

// ----------------------------------------------------------------------------
// the Gantt chart: a row per stage, a box per op

int peak_in_flight(const Timeline& timeline, int stage) {
  int now = 0, most = 0;
  for (const Placed& p : timeline[std::size_t(stage)]) most = std::max(most, now += p.op.pass == Pass::Forward ? 1 : -1);
  return most;
}

void write_gantt_svg(const std::string& path, const std::string& title,
                     const std::vector<std::pair<std::string, Timeline>>& timelines,
                     const std::vector<std::vector<int>>& bounds) {
  double longest = 1e-12;
  int rows = 0;
  for (const auto& [label, t] : timelines) longest = std::max(longest, makespan(t)), rows += int(t.size()) + 1;
  const double left = 90, width = 820, row_h = 26, top = 40, memory = 110;  // memory: the in-flight column
  const double height = top + row_h * rows + 30;
  auto x_of = [&](double seconds) { return left + width * seconds / longest; };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + memory << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << (left + width) / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  double y = top;
  for (std::size_t k = 0; k < timelines.size(); ++k) {
    const auto& [label, t] = timelines[k];
    svg << "<text x=\"4\" y=\"" << y + 16 << "\" font-weight=\"bold\">" << label << "  (bubble "
        << fixed(100 * bubble_fraction(t), 1) << " %)</text>\n"
        << "<text x=\"" << left + width + 8 << "\" y=\"" << y + 16 << "\" font-weight=\"bold\">in flight</text>\n";
    y += row_h;
    for (std::size_t s = 0; s < t.size(); ++s, y += row_h) {
      // the chapter's memory point: activations held at once, against the schedule's bound
      const int peak = peak_in_flight(t, int(s));
      const bool bounded = k < bounds.size() && s < bounds[k].size(), over = bounded && peak > bounds[k][s];
      svg << "<text x=\"" << left + width + 8 << "\" y=\"" << y + 16 << "\"" << (over ? " fill=\"#c00000\" font-weight=\"bold\"" : "")
          << ">peak " << peak << (bounded ? str(" (≤ ", bounds[k][s], ")") : "") << "</text>\n";
      svg << "<text x=\"4\" y=\"" << y + 16 << "\">stage " << s << "</text>\n"
          << "<rect x=\"" << left << "\" y=\"" << y + 2 << "\" width=\"" << x_of(makespan(t)) - left << "\" height=\""
          << row_h - 4 << "\" fill=\"#f2f2f2\"/>\n";
      for (const Placed& p : t[s]) {
        const bool fwd = p.op.pass == Pass::Forward;
        const double x = x_of(p.start), w = std::max(1.0, x_of(p.end) - x);
        svg << "<rect x=\"" << x << "\" y=\"" << y + 2 << "\" width=\"" << w << "\" height=\"" << row_h - 4 << "\" fill=\""
            << (fwd ? "#4a7fb0" : "#d0652a") << "\" stroke=\"white\"/>\n"
            << "<text x=\"" << x + w / 2 << "\" y=\"" << y + 17 << "\" text-anchor=\"middle\" fill=\"white\">"
            << op_name(p.op) << "</text>\n";
      }
    }
  }
  svg << "<text x=\"" << left << "\" y=\"" << height - 10 << "\">time → (one step, " << fixed(longest * 1e3, 1)
      << " ms on the clock); <tspan fill=\"#4a7fb0\">■ forward</tspan> <tspan fill=\"#d0652a\">■ backward</tspan>, "
      << "grey: the stage waits (the bubble); "
      << "in flight: micro-batches held (≤ the schedule's bound)</text>\n</svg>\n";
  write_output_file(path, svg.str());
}

void write_gantt_trace(const std::string& path, const std::vector<std::pair<std::string, Timeline>>& timelines) {
  std::vector<std::string> parts;
  for (std::size_t k = 0; k < timelines.size(); ++k) {
    const auto& [label, t] = timelines[k];
    const int pid = int(k) + 1;
    std::ostringstream json;
    json << "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":0,\"args\":{\"name\":\"" << label
         << " (clock)\"}}";
    for (std::size_t s = 0; s < t.size(); ++s) {
      json << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << s
           << ",\"args\":{\"name\":\"stage " << s << "\"}}";
      for (const Placed& p : t[s])
        json << ",{\"name\":\"" << op_name(p.op) << "\",\"cat\":\""
             << (p.op.pass == Pass::Forward ? "forward" : "backward") << "\",\"ph\":\"X\",\"pid\":" << pid
             << ",\"tid\":" << s << ",\"ts\":" << p.start * 1e6 << ",\"dur\":" << (p.end - p.start) * 1e6
             << ",\"args\":{\"micro_batch\":" << p.op.micro_batch << "}}";
    }
    json << "]";
    parts.push_back(json.str());
  }
  write_chrome_trace(path, parts);
}

}  // namespace dpt::ch13
