// test_ch10_chapter.cpp — chapter 10's program, ch10_compression: every
// verdict on a small problem (threads, and mpirun -np 3), and bad
// --compress specs stopped at the flags with one sentence and exit 2.
#include "support/catch.h"
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"
#include "support/single_device.h"

using namespace dpt;

TEST_CASE("chapter: ch10's tour passes every verdict on 3 rank threads", "[ch10]") {
  auto run = dpt_test::run_program("ch10_compression", "--ranks 3 " + dpt_test::small_problem(8) + " --compress topk:20 --error-feedback");
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("topk:20 +EF: on each rank, sum delivered + residual = sum of its gradients") != std::string::npos);
  CHECK(run.output.find("PowerSGD at full rank = the uncompressed mean") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: under mpirun -np 3, ch10's verdicts pass", "[ch10][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch10_compression", 3, "--comm mpi --comm-timeout 20 --no-compare --compress sign "
                                                      "--error-feedback " + dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
}

TEST_CASE("chapter: a bad --compress is one sentence and exit 2", "[ch10]") {
  struct Bad { const char* flag; const char* says; };
  for (const Bad& bad : {Bad{"topk:0", "K must be from 1 to the model's 596 parameters"},
                         Bad{"powersgd:5", "R must be from 1 to 4, the smallest side"},
                         Bad{"gzip", "unknown compressor"}, Bad{"topk:x", "expects a whole number"}}) {
    auto run = dpt_test::run_program("ch10_compression", dpt_test::small_problem(8) + " --compress " + bad.flag);
    INFO("--compress " << bad.flag << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
  }
}

TEST_CASE("chapter: ch10 --mode diloco passes its verdicts, with the H=1 law for momentum", "[ch10]") {
  auto run = dpt_test::run_program("ch10_compression", "--ranks 3 --mode diloco --inner-steps 5 " + dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("H=1, outer lr 1, momentum 0, inner momentum = data parallel") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: --inner-steps that does not divide --steps is one sentence and exit 2", "[ch10]") {
  auto run = dpt_test::run_program("ch10_compression", "--mode diloco --inner-steps 7 " + dpt_test::small_problem(8));
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("7 does not divide --steps 30") != std::string::npos);
}

TEST_CASE("chapter: ch10's bad DiLoCo flags are one sentence and exit 2, never a later failure", "[ch10]") {
  struct Bad { std::string flags; const char* says; };
  for (const Bad& bad : {Bad{"--mode diloco --compress topk:10 --error-feedback", "--compress: not used by --mode diloco"},
                         Bad{"--mode diloco --error-feedback", "--error-feedback: not used by --mode diloco"},
                         Bad{"--mode diloco --plot x.svg", "--plot: not used by --mode diloco"},
                         Bad{"--inner-steps 5", "--inner-steps: not used by --mode compress"},
                         Bad{"--mode diloco --outer-momentum nan", "expects a finite number from 0 to 0.999, got 'nan'"},
                         Bad{"--mode diloco --outer-momentum -0.5", "expects a finite number from 0 to 0.999"},
                         Bad{"--mode diloco --outer-momentum 1", "expects a finite number from 0 to 0.999"},
                         Bad{"--mode diloco --outer-lr 1e30", "expects a finite number above 0 and at most 2"},
                         Bad{"--mode diloco --outer-lr nan", "expects a finite number above 0 and at most 2"},
                         Bad{"--no-compare --outer-lr 0.5", "--outer-lr: not used by --mode compress --no-compare"},
                         Bad{"--ranks 65", "ch10 runs at most 64"}}) {
    auto run = dpt_test::run_program("ch10_compression", dpt_test::small_problem(8) + " " + bad.flags);
    INFO(bad.flags << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
  }
}

TEST_CASE("chapter: on 1 rank, ch10's verdicts about what ranks share say they cannot fail", "[ch10]") {
  auto run = dpt_test::run_program("ch10_compression", "--ranks 1 " + dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("top-k: decoded mean = the serial mean of every rank's top-k (random vectors, shared indices), "
                        "max |diff| / max \u2014 cannot fail on 1 rank") != std::string::npos);
  CHECK(run.output.find("PowerSGD at full rank = the uncompressed mean, max |approx - M| / max |M| \u2014 cannot fail") != std::string::npos);
  INFO("approx = P q^T is this rank's own result: its check judges on 1 rank too");
  CHECK(run.output.find("\u2714 PowerSGD's factors: approx = P q^T") != std::string::npos);
  CHECK(run.output.find("diloco: the outer step = SGD with Nesterov momentum") != std::string::npos);
}
