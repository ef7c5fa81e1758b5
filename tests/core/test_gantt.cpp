// test_gantt.cpp — the Gantt chart of one step (gantt.h) and the step's
// timeline (step_timeline.h): the SVG read back as XML (one row per rank, one
// bar per span, rows under their stage), bars that never overlap, the
// innermost span owning each instant (checked instant by instant against the
// shortest covering span), the named groups' spans, the gather to rank 0 and
// the slow rank read off the bars.
#include "support/catch.h"

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "dpt/check.h"
#include "dpt/gantt.h"
#include "dpt/grid.h"
#include "dpt/launch.h"
#include "dpt/step_timeline.h"
#include "dpt/trace.h"
#include "support/threads_world.h"
#include "support/xml_elements.h"

using dpt::GanttKind;
using dpt::GanttSpan;

namespace {
std::vector<const dpt_test::XmlElement*> with_class(const dpt_test::XmlDocument& doc, const std::string& cls) {
  std::vector<const dpt_test::XmlElement*> out;
  for (const auto& e : doc.elements)
    if (e.attribute("class") == cls) out.push_back(&e);
  return out;
}

// The kind of the shortest span covering instant t on `rank` (the innermost,
// since one thread's spans nest), or nothing.
const GanttSpan* covering_span(const std::vector<GanttSpan>& spans, int rank, double t) {
  const GanttSpan* best = nullptr;
  for (const GanttSpan& s : spans)
    if (s.rank == rank && s.start <= t && t < s.end && (!best || s.end - s.start < best->end - best->start)) best = &s;
  return best;
}
}  // namespace

TEST_CASE("gantt: the SVG is well-formed, one row per rank under its stage, one bar per span of its kind", "[gantt]") {
  dpt::GanttChart chart{"a step & its <ranks>", {0, 0, 1, 1, 1}};
  const GanttKind kinds[] = {GanttKind::Forward,      GanttKind::Backward,     GanttKind::Compute, GanttKind::TpCollective,
                             GanttKind::DpCollective, GanttKind::PpTransfer,   GanttKind::Comm};
  for (int r = 0; r < 5; ++r)
    for (int k = 0; k < 7; ++k) chart.spans.push_back({r, 1.0 + 0.01 * k, 1.0 + 0.01 * k + 0.005, kinds[k], "bar \"" + std::to_string(k) + "\""});
  chart.rank_notes = {"", "", "slowest & last", "", ""};
  const dpt_test::XmlDocument doc = dpt_test::parse_xml(dpt::svg(chart));
  REQUIRE(doc.problem == "");
  REQUIRE(doc.elements.front().tag == "svg");
  const auto rows = with_class(doc, "row"), bars = with_class(doc, "bar"), stages = with_class(doc, "stage");
  CHECK(rows.size() == 5);
  CHECK(bars.size() == chart.spans.size());
  CHECK(stages.size() == 2);
  std::set<std::string> ranks_seen;
  for (const auto* row : rows) {
    const int r = std::stoi(row->attribute("data-rank"));
    ranks_seen.insert(row->attribute("data-rank"));
    CHECK(row->attribute("data-stage") == std::to_string(chart.stage_of_rank[std::size_t(r)]));
    const auto& parent = doc.elements[row->ancestors.back()];  // the row sits in its stage's group
    CHECK(parent.attribute("class") == "stage");
    CHECK(parent.attribute("data-stage") == row->attribute("data-stage"));
  }
  CHECK(ranks_seen.size() == 5);
  int per_kind[7] = {};
  for (const auto* bar : bars) {
    const auto& row = doc.elements[bar->ancestors.back()];
    CHECK(row.attribute("data-rank") == bar->attribute("data-rank"));  // each bar on its rank's row
    for (int k = 0; k < 7; ++k) per_kind[k] += bar->attribute("data-kind") == dpt::gantt_kind_name(kinds[k]);
    CHECK(std::stod(bar->attribute("data-end-ms")) >= std::stod(bar->attribute("data-start-ms")));
  }
  for (int k = 0; k < 7; ++k) CHECK(per_kind[k] == 5);
  CHECK(with_class(doc, "key").size() == 7);  // the legend: a key per kind
}

TEST_CASE("gantt: overlapping bars on one rank, or a bar off the chart, are an error naming it", "[gantt]") {
  dpt::GanttChart chart{"t", {0, 0}};
  chart.spans = {{1, 0.0, 2.0, GanttKind::Forward, "forward"}, {1, 1.0, 3.0, GanttKind::TpCollective, "tp all_reduce"}};
  CHECK_THROWS_WITH(dpt::svg(chart), contains_text("on rank 1") &&
                                          contains_text("must not overlap"));
  chart.spans = {{2, 0.0, 1.0, GanttKind::Forward, "forward"}};
  CHECK_THROWS_WITH(dpt::svg(chart), contains_text("rank 2"));
  chart.spans = {{0, 0.0, 1.0, GanttKind::Forward, "a"}, {0, 1.0, 2.0, GanttKind::Backward, "b"}};  // touching is fine
  CHECK_NOTHROW(dpt::svg(chart));
}

TEST_CASE("gantt: innermost_bars gives each instant to the innermost span, without overlaps", "[gantt]") {
  // backward [0, 10] holding two TP all-reduces, one holding a nested send; forward after; a DP call alone.
  const std::vector<GanttSpan> nested = {
      {0, 0.0, 10.0, GanttKind::Backward, "backward"},   {0, 3.0, 4.0, GanttKind::TpCollective, "tp all_reduce"},
      {0, 6.0, 8.0, GanttKind::TpCollective, "tp all_reduce"}, {0, 6.5, 7.0, GanttKind::Comm, "send"},
      {0, 10.0, 12.0, GanttKind::Forward, "forward"},   {0, 13.0, 14.0, GanttKind::DpCollective, "dp all_reduce"}};
  const std::vector<GanttSpan> bars = dpt::innermost_bars(nested);
  for (std::size_t i = 1; i < bars.size(); ++i) CHECK(bars[i].start >= bars[i - 1].end);
  for (double t = 0.05; t < 14.5; t += 0.1) {  // every instant: the same owner (or none) in both
    const GanttSpan* expected = covering_span(nested, 0, t);
    const GanttSpan* got = covering_span(bars, 0, t);
    INFO("t = " << t);
    REQUIRE((expected == nullptr) == (got == nullptr));
    if (expected) CHECK(got->kind == expected->kind);
  }
  CHECK(bars.size() == 9);  // backward in 3 pieces, tp, tp in 2 around the send, send, forward, dp
}

TEST_CASE("gantt: a span's kind comes from its category and its group's name", "[gantt]") {
  CHECK(dpt::gantt_kind("forward", "compute") == GanttKind::Forward);
  CHECK(dpt::gantt_kind("backward", "compute") == GanttKind::Backward);
  CHECK(dpt::gantt_kind("optimizer", "compute") == GanttKind::Compute);
  CHECK(dpt::gantt_kind("tp all_reduce", "comm") == GanttKind::TpCollective);
  CHECK(dpt::gantt_kind("dp reduce_scatter", "comm") == GanttKind::DpCollective);
  CHECK(dpt::gantt_kind("pp send", "comm") == GanttKind::PpTransfer);
  CHECK(dpt::gantt_kind("all_reduce", "comm") == GanttKind::Comm);
  CHECK(dpt::gantt_kind("tpx all_reduce", "comm") == GanttKind::Comm);
  CHECK_FALSE(dpt::gantt_kind("step", "step").has_value());
}

TEST_CASE("gantt: the slowest rank is the one with the most compute, the others' wait is their extra comm", "[gantt]") {
  std::vector<GanttSpan> bars;
  for (int r = 0; r < 4; ++r) {
    const double compute = r == 2 ? 4.0 : 1.0, comm = r == 2 ? 0.5 : 3.5;
    bars.push_back({r, 0.0, compute, GanttKind::Forward, "forward"});
    bars.push_back({r, compute, compute + comm, GanttKind::TpCollective, "tp all_reduce"});
  }
  const dpt::StepWaits w = dpt::step_waits(bars, 4);
  CHECK(w.slowest == 2);
  for (int r = 0; r < 4; ++r) CHECK(w.wait[std::size_t(r)] == (r == 2 ? 0.0 : 3.0));
  CHECK(dpt::step_waits({}, 4).slowest == -1);
}

TEST_CASE("gantt: a grid's groups are named after their axes and their spans, stored for one step, gather to rank 0", "[gantt]") {
  std::vector<GanttSpan> gathered;
  dpt::launch(dpt_test::threads(4), [&](dpt::Context& ctx) {
    dpt::Grid grid(ctx.comm, {{"tp", 2, "--tp"}, {"dp", 2, "--dp"}});
    CHECK(grid.group("tp").name() == "tp");
    CHECK(grid.group("dp").name() == "dp");
    const auto from = dpt::TraceClock::now();
    ctx.trace.start_storing();  // no --trace: stored only in this window
    {
      auto forward = ctx.trace.span("forward", "compute");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      float x = 1;
      grid.group("tp").all_reduce(&x, 1, dpt::ReduceOp::Sum);
    }
    float y = 1;
    grid.group("dp").all_reduce(&y, 1, dpt::ReduceOp::Sum);
    ctx.trace.stop_storing();
    const auto mine = dpt::step_bars(ctx.trace, ctx.rank, from, dpt::TraceClock::now());
    auto all = dpt::gather_bars(ctx.comm, mine);
    if (ctx.is_root()) gathered = all;
    else CHECK(all.empty());
  });
  for (int r = 0; r < 4; ++r) {
    std::vector<GanttKind> kinds;
    for (const GanttSpan& b : gathered)
      if (b.rank == r) kinds.push_back(b.kind);
    INFO("rank " << r);
    // forward, the TP all-reduce inside it, forward's last sliver (may be too short to see), the DP all-reduce
    REQUIRE(kinds.size() >= 3);
    CHECK(kinds.front() == GanttKind::Forward);
    CHECK(kinds[1] == GanttKind::TpCollective);
    CHECK(kinds.back() == GanttKind::DpCollective);
  }
}

TEST_CASE("gantt: a tracer without --trace stores spans only between start_storing and stop_storing", "[gantt]") {
  dpt::Tracer tracer(0, false);
  { auto before = tracer.span("forward", "compute"); }
  const auto from = dpt::TraceClock::now();
  tracer.start_storing();
  { auto inside = tracer.span("backward", "compute"); }
  tracer.stop_storing();
  const auto to = dpt::TraceClock::now();
  { auto after = tracer.span("optimizer", "compute"); }
  const std::vector<dpt::RecordedSpan> spans = tracer.spans_between(from, to);
  REQUIRE(spans.size() == 1);
  CHECK(spans[0].name == "backward");
  CHECK(spans[0].end >= spans[0].start);
  CHECK(tracer.event_count() == 1);
}
