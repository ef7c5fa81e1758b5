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
