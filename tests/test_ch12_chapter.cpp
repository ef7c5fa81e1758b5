// test_ch12_chapter.cpp — chapter 12's program, ch12_tensor_parallel: every
// verdict (gradients = one device's, bytes = the formula) on rank threads
// and under mpirun, every rank's groups printed, and bad --tp / --dp / --model
// stopped at the flags with one sentence and exit 2; T x D through groups.
#include "support/catch.h"
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"

namespace {
// mpirun under the asan preset: Open MPI keeps allocations until exit, which
// LeakSanitizer reports (no dpt frame in them), as tests/mpi/CMakeLists.txt says;
// no other sanitizer check is switched off. Harmless without ASan.
dpt_test::ProgramResult run_mpi(int np, const std::string& args) {
  return dpt_test::run_command("ASAN_OPTIONS=detect_leaks=0 " + dpt_test::launcher() + " -np " + std::to_string(np) + " " +
                               dpt_test::program_path("ch12_tensor_parallel") + " " + args);
}

// A small problem: two layer pairs, hidden width 8 (T = 1, 2, 4 divide it).
std::string small(const std::string& extra, const std::string& model = "32-8-6-8-4") {
  return "--quiet --model " + model + " --samples 256 --steps 20 --optimizer momentum --lr 0.05 --batch 8 " + extra;
}
}  // namespace

TEST_CASE("chapter: ch12 passes every verdict with T = 2 and T = 4 rank threads", "[ch12]") {
  for (const char* ranks : {"--ranks 2", "--ranks 4"}) {
    auto run = dpt_test::run_program("ch12_tensor_parallel", small(ranks));
    INFO(ranks << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 0);
    CHECK(run.output.find("synced gradient = one device's on the global batch") != std::string::npos);
    CHECK(run.output.find("TP all-reduce bytes per step = 4 B x 16") != std::string::npos);
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

TEST_CASE("chapter: under mpirun -np 2, ch12's gradients equal one device's", "[ch12][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = run_mpi(2, "--comm mpi --comm-timeout 20 " + small(""));
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("synced gradient = one device's on the global batch") != std::string::npos);
}

TEST_CASE("chapter: --tp 2 --dp 2 on 4 rank threads passes every verdict, DP bytes = the slices' gradients", "[ch12]") {
  auto run = dpt_test::run_program("ch12_tensor_parallel", small("--ranks 4 --tp 2 --dp 2"));
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("DP all-reduce bytes per step = 4 x parameters per rank") != std::string::npos);
  CHECK(run.output.find("synced gradient = one device's on the global batch") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: under mpirun -np 4 --tp 2 --dp 2 the gradients equal one device's", "[ch12][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = run_mpi(4, "--comm mpi --comm-timeout 20 " + small("--tp 2 --dp 2"));
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("DP all-reduce bytes per step = 4 x parameters per rank") != std::string::npos);
}

TEST_CASE("chapter: --check-groups prints every rank's TP and DP group", "[ch12]") {
  auto run = dpt_test::run_program("ch12_tensor_parallel", "--model 32-8-6-8-4 --samples 256 --steps 0 --ranks 6 --tp 2 --check-groups");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  for (const char* line : {"rank 0: TP group [0 1] as t=0, DP group [0 2 4] as d=0", "rank 5: TP group [4 5] as t=1, DP group [1 3 5] as d=2"})
    CHECK(run.output.find(line) != std::string::npos);
}

TEST_CASE("chapter: --tp that does not divide the hidden width, or T x D not the ranks, is one sentence and exit 2", "[ch12]") {
  struct Bad { std::string args; const char* says; };
  for (const Bad& bad : {Bad{"--ranks 3", "--tp 3 does not divide the hidden width 8"},
                         Bad{"--ranks 4 --tp 2 --dp 3", "--tp 2 x --dp 3 = 6 ranks, but the run has 4"},
                         Bad{"--ranks 4 --dp 3", "--dp 3 does not divide the 4 ranks"},
                         Bad{"--ranks 6 --tp 4", "--tp 4 does not divide the 6 ranks"},
                         Bad{"--ranks 2", "give an even number"}}) {
    const bool odd = bad.says == std::string("give an even number");  // a model of three layers
    auto run = dpt_test::run_program("ch12_tensor_parallel", small(bad.args, odd ? "32-8-4-4" : "32-8-6-8-4"));
    INFO(bad.args << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
    CHECK(run.output.find('\n') == run.output.size() - 1);  // one line
  }
}

TEST_CASE("chapter: --tp or --dp that is not a positive integer is dpt's one sentence and exit 2", "[ch12]") {
  for (const char* bad : {"--tp 0", "--tp -2", "--tp abc", "--dp 0", "--tp 5000"}) {
    auto run = dpt_test::run_program("ch12_tensor_parallel", small(std::string("--ranks 4 ") + bad));
    INFO(bad << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find("expects an integer from 1 to 4096, got '") != std::string::npos);
    CHECK(run.output.find('\n') == run.output.size() - 1);  // one line
  }
}

TEST_CASE("chapter: a bare run splits over 4 ranks, and on 1 rank the verdicts that compare ranks cannot fail", "[ch12]") {
  auto bare = dpt_test::run_program("ch12_tensor_parallel", small(""));
  INFO(dpt_test::summary_line(bare.output));
  CHECK(bare.exit_code == 0);
  CHECK(bare.output.find("4 ranks: TP groups of 4") != std::string::npos);
  CHECK(bare.output.find("each rank's slices = the flags' weights it owns, entry by entry") != std::string::npos);
  CHECK(bare.output.find("cannot fail") == std::string::npos);
  auto one = dpt_test::run_program("ch12_tensor_parallel", small("--ranks 1"));
  INFO(dpt_test::summary_line(one.output));
  CHECK(one.exit_code == 0);
  CHECK(one.output.find("\u2014 step 0: the split model's loss = one device's \u2014 cannot fail on 1 rank") != std::string::npos);
  CHECK(one.output.find("\u2714 step 0") == std::string::npos);
}
