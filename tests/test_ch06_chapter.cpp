// test_ch06_chapter.cpp — chapter 06's program, ch06_averaging: its verdicts
// (threads and mpirun -np 4), H = 1 like one device, its --metrics file, and
// ranks started with different schedules.
#include "support/catch.h"
#include <fstream>
#include <sstream>
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"
#include "support/single_device.h"

using namespace dpt;

// ----------------------------------------------------------------------------
// the chapter binary

TEST_CASE("chapter: ch06's verdicts pass on 3 rank threads", "[ch06]") {
  auto run = dpt_test::run_program("ch06_averaging", "--ranks 3 " + dpt_test::small_problem(8) + " --adam-lr 0.001");
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("H=1 adam differs from gradient averaging") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch06 --average params --every 1 trains like one device (threads)", "[ch06]") {
  dpt_test::check_matches_single_device("ch06_averaging", 4, false, "--no-compare --average params --every 1");
}

TEST_CASE("chapter: under mpirun -np 4, H=1 matches one device and every verdict passes", "[ch06][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  dpt_test::check_matches_single_device("ch06_averaging", 4, true, "--no-compare --average params --every 1");
  auto run = dpt_test::run_mpi("ch06_averaging", 4, "--comm mpi --comm-timeout 20 --every 3 --warmup-steps 4 " +
                                                        dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
}

TEST_CASE("chapter: ch06 writes loss and drift, plain and per setting, to --metrics", "[ch06]") {
  std::string path = dpt_test::temp_path("ch06.jsonl");
  auto run = dpt_test::run_program("ch06_averaging", "--ranks 2 --equivalence-steps 30 " + dpt_test::small_problem(8) +
                                                         " --metrics " + path);  // the H=1 runs as long as the rest
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  auto lines = dpt_test::read_jsonl(path);
  REQUIRE(lines.size() == 31);  // one per step, then the held-out report (evaluate.h)
  CHECK(lines[0].contains("loss:grads sgd"));
  CHECK(lines[0]["step"] == 0);
  CHECK(lines[29]["loss"] == lines[29]["loss:params H=4 W=2 momentum"]);  // the main run's plain loss, as every chapter writes
  CHECK(lines[29].contains("drift"));
  CHECK(lines[29].contains("drift:params H=4 W=2 momentum"));
  CHECK(lines[29]["drift:grads momentum"].get<double>() == 0);  // gradient averaging never drifts
  std::remove(path.c_str());
}

TEST_CASE("chapter: under mpirun, ranks started with a different schedule stop naming the flag", "[ch06][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // A rank averaging at other steps would pair its all-reduces with another
  // collective of its peer's: the agreement check must name the flag first.
  const std::string program = dpt_test::program_path("ch06_averaging") +
                              " --comm mpi --comm-timeout 20 --quiet --no-verify --no-compare " +
                              dpt_test::small_problem(8) + " ";
  for (auto differs : {std::make_pair("--every 3", "--every"), std::make_pair("--every 4 --warmup-steps 3", "--warmup-steps"),
                       std::make_pair("--every 4 --average-state", "--average-state")}) {
    auto run = dpt_test::run_mpmd(program + "--every 4", program + differs.first);
    INFO(differs.first << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, contains_text(differs.second) && contains_text("every rank needs the same flags"));
  }
}
