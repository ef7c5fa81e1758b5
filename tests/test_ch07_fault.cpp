// test_ch07_fault.cpp — chapter 07's --fail (zero_fault.h): a crash under
// mpirun, nothing else; the killed rank dies after the checkpoint of the
// steps before its step is sealed. What a supervisor does next:
// tests/mpi/dptrun/test_dptrun.py.
#include "support/catch.h"
#include <filesystem>
#include <fstream>
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"

namespace {
const std::string kFaultRun = "--quiet --no-verify --model 32-15-4 --samples 256 --optimizer adamw --lr 0.01 "
                              "--batch 6 --steps 10";
}  // namespace

TEST_CASE("chapter: ch07 --fail is a crash under mpirun only: other kinds, --join and threads are refused (exit 2)",
          "[ch07]") {
  const std::pair<const char*, const char*> refused[] = {
      {"--ranks 4 --fail 2@5", "only under mpirun (--comm mpi)"},
      {"--ranks 4 --fail 2@5:freeze", "under mpirun only crash"},
      {"--ranks 4 --fail 1@3:bitflip", "under mpirun only crash"},
      {"--ranks 4 --join 1@3", "--join 1@3"},
      {"--ranks 4 --fail 2@5:melt", "unknown kind 'melt'"},
  };
  for (const auto& [flags, said] : refused) {
    auto run = dpt_test::run_program("ch07_zero", kFaultRun + " " + flags);
    INFO(flags << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 2);
    CHECK(dpt_test::lines_in(run.output) == 1);
    CHECK_THAT(run.output, contains_text(said));
  }
}

// Its own test case, with "mpirun" in the name: CI runs those apart.
TEST_CASE("chapter: under mpirun -np 4, ch07 --fail 2@6 kills rank 2 after the checkpoint of step 6 is sealed",
          "[ch07][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  namespace fs = std::filesystem;
  const std::string dir = dpt_test::temp_path("ch07_fault_ck");
  fs::remove_all(dir);
  auto run = dpt_test::run_mpi("ch07_zero", 4, "--comm mpi --comm-timeout 20 " + kFaultRun + " --save-checkpoint " +
                                                   dir + " --checkpoint-every 2 --fail 2@6");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, contains_text("rank 2 of 4: --fail 2@6: this process kills itself (SIGKILL) at the start "
                                       "of step 6"));
  CHECK_THAT(run.output, contains_text("process rank 2") && contains_text("signal 9"));  // mpirun's own report
  std::ifstream latest(dir + "/latest");
  std::string named;
  latest >> named;
  CHECK(named == "step-00000006");  // steps 0-5 done and sealed: the steps before 6
  CHECK(fs::exists(dir + "/step-00000006/COMPLETE"));
  CHECK(!fs::exists(dir + "/step-00000008"));
  auto bad = dpt_test::run_mpi("ch07_zero", 2, "--comm mpi --comm-timeout 20 " + kFaultRun + " --fail 3@5");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, contains_text("--fail 3@5: rank 3, but the run has 2 ranks"));
  fs::remove_all(dir);
}
