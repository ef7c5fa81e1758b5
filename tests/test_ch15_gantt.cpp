// test_ch15_gantt.cpp — chapter 15's Gantt chart of one step (--gantt,
// --gantt-step) and its straggler (--slow-rank, --slowdown), read back from
// the SVG with an XML parser of the tests' own (support/xml_elements.h):
// one row per rank in its stage, each rank's bars in time order without
// overlap, forward, backward and Megatron's TP all-reduces on every rank (2
// per block each way), DP collectives apart; the slow rank named by the
// lecture, its verdict and the chart; bad chart flags stopped in one line.
#include "support/catch.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "dpt/comm.h"
#include "support/run_program.h"
#include "support/xml_elements.h"

namespace {
const std::string kGanttProgram = "ch15_3d_parallel";
// 2 blocks: Megatron's count is 2 TP all-reduces per block forward and 2 backward, 8 a step.
const std::string kGanttFlags =
    "--data synthetic --layers 2 --heads 4 --width 32 --context 16 --batch 2 --steps 3 --eval-every 3 --eval-batches 1 ";

dpt_test::XmlDocument read_chart(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return dpt_test::parse_xml(text.str());
}

// Each rank's bars as (start ms, end ms, kind), in document order.
using GanttRows = std::map<int, std::vector<std::pair<std::pair<double, double>, std::string>>>;
GanttRows bars_by_rank(const dpt_test::XmlDocument& doc) {
  GanttRows rows;
  for (const auto& e : doc.elements)
    if (e.attribute("class") == "bar")
      rows[std::stoi(e.attribute("data-rank"))].push_back(
          {{std::stod(e.attribute("data-start-ms")), std::stod(e.attribute("data-end-ms"))}, e.attribute("data-kind")});
  return rows;
}
}  // namespace

TEST_CASE("chapter: ch15 --gantt draws a row per rank in stage 0, bars in order, Megatron's TP count apart from DP", "[ch15]") {
  const std::string svg = dpt_test::temp_path("ch15_gantt.svg");
  std::remove(svg.c_str());
  auto run = dpt_test::run_program(kGanttProgram, kGanttFlags + "--ranks 4 --gantt " + svg);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const dpt_test::XmlDocument doc = read_chart(svg);
  REQUIRE(doc.problem == "");
  int rows = 0;
  for (const auto& e : doc.elements)
    if (e.attribute("class") == "row") {
      ++rows;
      CHECK(e.attribute("data-stage") == "0");  // no pipeline yet: one stage
    }
  CHECK(rows == 4);
  const GanttRows bars = bars_by_rank(doc);
  REQUIRE(bars.size() == 4);
  for (const auto& [rank, row] : bars) {
    INFO("rank " << rank);
    std::map<std::string, int> count;
    for (std::size_t i = 0; i < row.size(); ++i) {
      ++count[row[i].second];
      CHECK(row[i].first.second >= row[i].first.first);
      if (i > 0) CHECK(row[i].first.first >= row[i - 1].first.second - 1e-6);  // no overlap (printed to ~1e-6 ms)
    }
    CHECK(count["forward"] >= 1);
    CHECK(count["backward"] >= 1);
    CHECK(count["tp"] == 8);
    CHECK(count["dp"] >= 1);
  }
  std::remove(svg.c_str());
}

TEST_CASE("chapter: ch15 --slow-rank 2 on 4 ranks is named the slowest, by the lecture, its verdict and the chart", "[ch15]") {
  const std::string svg = dpt_test::temp_path("ch15_gantt_slow.svg");
  std::remove(svg.c_str());
  // Wide enough and slowed enough (~1 ms of compute x 25) that a rank descheduled for a few ms on a loaded
  // machine is not taken for the straggler: at --width 32 and x 8 the margin was ~6 ms, and a run under load lost it.
  const std::string flags =
      "--data synthetic --layers 2 --heads 4 --width 64 --context 32 --batch 2 --steps 3 --eval-every 3 --eval-batches 1 ";
  auto run = dpt_test::run_program(kGanttProgram, flags + "--ranks 4 --slow-rank 2 --slowdown 25 --gantt-step 1 --gantt " + svg);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("step 1: rank 2's compute took longest") != std::string::npos);
  CHECK(run.output.find("\u2714 the charted step's longest compute is --slow-rank's") != std::string::npos);
  const dpt_test::XmlDocument doc = read_chart(svg);
  REQUIRE(doc.problem == "");
  std::ifstream in(svg);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string drawn = text.str();
  const std::size_t row = drawn.find("<g class=\"row\" data-rank=\"2\""), said = drawn.find("the slowest");
  CHECK(said != std::string::npos);
  CHECK(drawn.find("the slowest", said + 1) == std::string::npos);  // one rank named
  CHECK(row < said);
  CHECK(said < drawn.find("</g>", row));  // in rank 2's row
  CHECK(run.output.find("\u2718") == std::string::npos);
  std::remove(svg.c_str());
}

TEST_CASE("chapter: ch15's chart flags that do not fit stop in one line naming the flag, exit 2", "[ch15]") {
  const std::pair<std::string, std::string> cases[] = {
      {"--gantt /nonexistent-dir/step.svg", "--gantt"},
      {"--slow-rank 4", "--slow-rank 4 is not a rank of this run"},
      {"--gantt-step 3", "--gantt-step 3 is past the last step"},
      {"--slowdown 0.5", "--slowdown"}};
  for (const auto& [flags, named] : cases) {
    auto run = dpt_test::run_program(kGanttProgram, kGanttFlags + "--ranks 4 " + flags);
    INFO(flags << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(named) != std::string::npos);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') <= 1);
  }
}

TEST_CASE("chapter: under mpirun -np 4 ch15 gathers every process's step to rank 0 and names --slow-rank 3", "[ch15][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  const std::string svg = dpt_test::temp_path("ch15_gantt_mpi.svg");
  std::remove(svg.c_str());
  // mpirun under the asan preset: Open MPI keeps allocations until exit (as test_ch12_chapter.cpp says).
  auto run = dpt_test::run_command("ASAN_OPTIONS=detect_leaks=0 " + dpt_test::launcher() + " -np 4 " +
                                   dpt_test::program_path(kGanttProgram) + " --comm mpi --comm-timeout 30 " + kGanttFlags +
                                   "--slow-rank 3 --slowdown 8 --gantt " + svg);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("rank 3's compute took longest") != std::string::npos);
  const dpt_test::XmlDocument doc = read_chart(svg);
  REQUIRE(doc.problem == "");
  CHECK(bars_by_rank(doc).size() == 4);  // every process's bars reached rank 0
  std::remove(svg.c_str());
}
