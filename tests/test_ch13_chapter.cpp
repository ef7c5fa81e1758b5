// test_ch13_chapter.cpp — chapter 13's program, ch13_pipeline_parallel:
// every verdict on a small problem for both schedules and with --dp 2
// (threads, and mpirun -np 4), a slow stage named by its verdict, the Gantt chart and its trace,
// and bad flags stopped with one sentence and exit 2.
#include "support/catch.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
const std::string kSmall = "--quiet --model 32-16-16-16-16-4 --samples 256 --steps 20 --batch 8 --micro-batches 4 ";
// Under threads: a run_schedule that deadlocks fails in seconds, not after the default 30 s.
const std::string kThreads = "--comm-timeout 3 " + kSmall;
}

TEST_CASE("chapter: ch13's verdicts pass on 4 stages, training with 1f1b and with gpipe", "[ch13]") {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    auto run = dpt_test::run_program("ch13_pipeline_parallel", "--ranks 4 " + kThreads + "--schedule " + schedule);
    INFO(schedule << ": " << run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(run.output.find("1f1b: peak micro-batches in flight on stage s <= min(P - s, M) (stages 0..P-1: 4, 3, 2, 1)") !=
          std::string::npos);
    CHECK(run.output.find("gpipe: bubble fraction by the clock = (P-1)/(M+P-1): 0.429") != std::string::npos);
    CHECK(run.output.find("synced gradient = one device's on the global batch") != std::string::npos);
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

TEST_CASE("chapter: --dp 2 with 2 stages on 4 ranks: the gradient is one device's on the global batch", "[ch13]") {
  auto run = dpt_test::run_program("ch13_pipeline_parallel", "--ranks 4 --stages 2 --dp 2 " + kThreads);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("synced gradient = one device's on the global batch") != std::string::npos);
  CHECK(run.output.find("2 x 2, 4 of 2") != std::string::npos);  // stages x pipelines, micro-batches
}

TEST_CASE("chapter: a bare run (no --ranks) splits the model over 4 stages on 4 rank threads", "[ch13]") {
  auto run = dpt_test::run_program("ch13_pipeline_parallel", kThreads);  // kThreads names no --ranks
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("4 x 1, 4 of 2") != std::string::npos);  // stages x pipelines, micro-batches
}

TEST_CASE("chapter: --metrics has one loss row per step, with --dp 2 as well", "[ch13]") {
  const std::string path = dpt_test::temp_path("ch13_metrics.jsonl");
  auto run = dpt_test::run_program("ch13_pipeline_parallel", "--ranks 4 --stages 2 --dp 2 " + kThreads + "--metrics " + path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<int64_t> steps;
  for (const nlohmann::json& row : dpt_test::read_jsonl(path))
    if (row.contains("loss")) {
      steps.push_back(row["step"].get<int64_t>());
      CHECK(row["loss"].is_number());
    }
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  std::remove(path.c_str());
}

TEST_CASE("chapter: a stage twice as slow is named by the verdict", "[ch13]") {
  auto run = dpt_test::run_program("ch13_pipeline_parallel", "--ranks 3 --stages 3 --slow-stage 1 " + kThreads);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("gpipe: the clock's busiest stage is stage 1, the one --slow-stage slowed") != std::string::npos);
  CHECK(run.output.find("1f1b: the clock's busiest stage is stage 1, the one --slow-stage slowed") != std::string::npos);
}

TEST_CASE("chapter: --gantt writes an SVG with a box per op, --gantt-trace a Chrome trace of the same", "[ch13]") {
  const std::string svg = "ch13_test_gantt.svg", trace = "ch13_test_gantt.json";
  std::remove(svg.c_str()), std::remove(trace.c_str());
  auto run = dpt_test::run_program("ch13_pipeline_parallel", "--ranks 2 --stages 2 " + kThreads + "--gantt " + svg +
                                                                 " --gantt-trace " + trace);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::stringstream drawn, traced;
  drawn << std::ifstream(svg).rdbuf();
  traced << std::ifstream(trace).rdbuf();
  std::size_t boxes = 0;
  for (std::size_t at = drawn.str().find("<rect"); at != std::string::npos; at = drawn.str().find("<rect", at + 1)) ++boxes;
  // 2 schedules x 2 stages x 2M ops, plus a background per stage row and the page
  CHECK(boxes == 2 * 2 * 8 + 2 * 2 + 1);
  INFO("each row ends with the stage's peak micro-batches in flight against its schedule's bound: "
       "GPipe holds all M = 4, 1F1B min(P - s, M) = 2, 1");
  CHECK(drawn.str().find(">peak 4 (≤ 4)</text>") != std::string::npos);  // gpipe, both stages
  CHECK(drawn.str().find(">peak 2 (≤ 2)</text>") != std::string::npos);  // 1f1b stage 0
  CHECK(drawn.str().find(">peak 1 (≤ 1)</text>") != std::string::npos);  // 1f1b stage 1
  CHECK(drawn.str().find("#c00000") == std::string::npos);  // nothing over its bound
  std::size_t opened = 0, closed = 0;  // well formed, as far as text elements go
  for (std::size_t at = drawn.str().find("<text"); at != std::string::npos; at = drawn.str().find("<text", at + 1)) ++opened;
  for (std::size_t at = drawn.str().find("</text>"); at != std::string::npos; at = drawn.str().find("</text>", at + 1)) ++closed;
  CHECK(opened == closed);
  nlohmann::json doc = nlohmann::json::parse(traced.str());
  int spans = 0;
  for (const auto& event : doc["traceEvents"]) spans += event["ph"] == "X";
  CHECK(spans == 2 * 2 * 8);
  std::remove(svg.c_str()), std::remove(trace.c_str());
}

TEST_CASE("chapter: under mpirun -np 4, ch13's verdicts pass", "[ch13][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (const char* layout : {"", "--stages 2 --dp 2 "}) {
    auto run = dpt_test::run_mpi("ch13_pipeline_parallel", 4, std::string("--comm mpi --comm-timeout 20 ") + layout + kSmall);
    INFO(layout << dpt_test::summary_line(run.output) << "\n" << run.output);
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("chapter: bad --stages, --micro-batches, --slow-stage, --stage-ms or rank count get one sentence and exit 2", "[ch13]") {
  struct Bad { const char* args; const char* says; };
  for (const Bad& bad : {Bad{"--ranks 6 --stages 6", "is more than the 5 layers"},
                         Bad{"--ranks 4 --micro-batches 5", "does not divide --batch 32"},
                         Bad{"--ranks 3", "--stages 4 x --dp 1 = 4 ranks, but the run has 3 ranks"},
                         Bad{"--ranks 4 --dp 2", "--stages 4 x --dp 2 = 8 ranks, but the run has 4 ranks"},
                         Bad{"--ranks 1", "but the run has 1 rank: start 4 ranks, or change --stages or --dp"},
                         Bad{"--ranks 4 --stage-ms 0 --slow-stage 1", "--stage-ms, which is 0"},
                         Bad{"--ranks 4 --stage-ms nan", "--stage-ms"},
                         Bad{"--ranks 4 --stage-ms -0.5", "-0.5 is not a time"},
                         Bad{"--ranks 4 --slow-stage 4", "is not a stage"}}) {
    auto run = dpt_test::run_program("ch13_pipeline_parallel", std::string("--quiet ") + bad.args);
    INFO(bad.args << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
    CHECK(run.output.find('\n') == run.output.size() - 1);  // one line
  }
}
