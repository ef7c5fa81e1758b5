// step_timeline.cpp — one step's spans made into a Gantt chart's bars,
// gathered to rank 0, and the straggler read off them (step_timeline.h).
#include "dpt/step_timeline.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "dpt/comm.h"
#include "dpt/trace.h"

namespace dpt {

namespace {
bool starts_with_group(const std::string& name, const char* group) {
  const std::size_t n = std::strlen(group);
  return name.size() > n && name.compare(0, n, group) == 0 && name[n] == ' ';
}

// One bar on the wire: typed messages carry plain records.
struct WireBar {
  int32_t rank = 0, kind = 0;
  double start = 0, end = 0;
  char label[32] = {};
};
}  // namespace

std::optional<GanttKind> gantt_kind(const std::string& name, const std::string& category) {
  if (category == "compute")
    return name == "forward" ? GanttKind::Forward : name == "backward" ? GanttKind::Backward : GanttKind::Compute;
  if (category != "comm") return std::nullopt;
  if (starts_with_group(name, "tp")) return GanttKind::TpCollective;
  if (starts_with_group(name, "dp")) return GanttKind::DpCollective;
  if (starts_with_group(name, "pp")) return GanttKind::PpTransfer;
  return GanttKind::Comm;
}

std::vector<GanttSpan> innermost_bars(const std::vector<GanttSpan>& nested) {
  std::vector<GanttSpan> sorted = nested;  // by start; an enclosing span before what it encloses
  std::stable_sort(sorted.begin(), sorted.end(), [](const GanttSpan& a, const GanttSpan& b) {
    return a.start < b.start || (a.start == b.start && a.end > b.end);
  });
  std::vector<GanttSpan> bars, open;  // open: the spans enclosing now, innermost last
  double now = -std::numeric_limits<double>::max();
  auto piece = [&bars](const GanttSpan& s, double from, double to) {
    if (to > from) bars.push_back({s.rank, from, to, s.kind, s.label});
  };
  for (GanttSpan s : sorted) {
    while (!open.empty() && open.back().end <= s.start) {  // spans that ended before s: their last pieces
      piece(open.back(), now, open.back().end);
      now = std::max(now, open.back().end);
      open.pop_back();
    }
    if (!open.empty()) {
      piece(open.back(), now, s.start);  // the enclosing span up to s
      s.end = std::min(s.end, open.back().end);
    }
    now = std::max(now, s.start);
    open.push_back(s);
  }
  while (!open.empty()) {
    piece(open.back(), now, open.back().end);
    now = std::max(now, open.back().end);
    open.pop_back();
  }
  return bars;
}

std::vector<GanttSpan> step_bars(const Tracer& tracer, int rank, TraceClock::time_point from, TraceClock::time_point to) {
  std::vector<GanttSpan> spans;
  for (const RecordedSpan& s : tracer.spans_between(from, to))
    if (s.lane == 0)
      if (std::optional<GanttKind> kind = gantt_kind(s.name, s.category)) spans.push_back({rank, s.start, s.end, *kind, s.name});
  return innermost_bars(spans);
}

std::vector<GanttSpan> gather_bars(Communicator& comm, const std::vector<GanttSpan>& mine) {
  // Two rounds, since a gather moves equal sizes: every rank's count, then every rank's bars padded to the most.
  const std::vector<int64_t> counts = comm.all_gather(int64_t(mine.size()));
  const int64_t most = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  std::vector<WireBar> wire(static_cast<std::size_t>(most)), all(static_cast<std::size_t>(most * comm.size()));
  for (std::size_t i = 0; i < mine.size(); ++i) {
    wire[i].rank = mine[i].rank, wire[i].kind = int32_t(mine[i].kind);
    wire[i].start = mine[i].start, wire[i].end = mine[i].end;
    std::strncpy(wire[i].label, mine[i].label.c_str(), sizeof wire[i].label - 1);
  }
  comm.all_gather(wire.data(), all.data(), most);
  std::vector<GanttSpan> out;
  if (comm.rank() != 0) return out;
  for (int r = 0; r < comm.size(); ++r)
    for (int64_t i = 0; i < counts[std::size_t(r)]; ++i) {
      const WireBar& w = all[std::size_t(r * most + i)];
      out.push_back({w.rank, w.start, w.end, GanttKind(w.kind), std::string(w.label)});
    }
  return out;
}

StepWaits step_waits(const std::vector<GanttSpan>& bars, int ranks) {
  StepWaits w;
  w.compute.assign(std::size_t(ranks), 0.0), w.comm.assign(std::size_t(ranks), 0.0), w.wait.assign(std::size_t(ranks), 0.0);
  for (const GanttSpan& b : bars)
    if (b.rank >= 0 && b.rank < ranks) (is_compute(b.kind) ? w.compute : w.comm)[std::size_t(b.rank)] += b.end - b.start;
  for (int r = 0; r < ranks; ++r)
    if (w.compute[std::size_t(r)] > 0 && (w.slowest < 0 || w.compute[std::size_t(r)] > w.compute[std::size_t(w.slowest)]))
      w.slowest = r;
  if (w.slowest < 0) return w;
  for (int r = 0; r < ranks; ++r) w.wait[std::size_t(r)] = std::max(0.0, w.comm[std::size_t(r)] - w.comm[std::size_t(w.slowest)]);
  return w;
}

}  // namespace dpt
