// test_ch16_mpi.cpp — ch16_fault_tolerance under mpirun: a launch survives a
// bit flip and a slow rank in place, with every verdict ✔; a frozen rank ends
// the launch, named by a peer's bounded wait; what mpirun cannot do is
// refused in one line. Restarts through scripts/dptrun (a crash, a freeze,
// a join, the weights against a plain resume): tests/mpi/dptrun/test_dptrun_ch16.py.
#include "support/catch.h"

#include <string>
#include <vector>

#include "dpt/comm.h"
#include "support/run_program.h"

namespace {

const char* const kMpiSmall = " --comm mpi --quiet --steps 12 --samples 128 ";

bool mpi_has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("chapter: ch16 under mpirun -np 4 survives a bit flip and a slow rank in place, every verdict holding",
          "[ch16][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch16_fault_tolerance", 4,
                               std::string(kMpiSmall) + "--comm-timeout 20 --fail 1@5:bitflip --fail 2@3:slow:2");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_FALSE(mpi_has(run.output, "✘"));
  for (const char* verdict : {"replicas identical", "the run = one device replaying the ledger",
                              "the ledger consumed every sample of every epoch exactly once",
                              "the bit flip of --fail 1@5:bitflip found by a checksum, rank 1 named",
                              "replicas parted only where a bit flip was planned",
                              "every slot committed, dropped, or undone by a rollback"})
    CHECK(mpi_has(run.output, std::string("✔ ") + verdict));
}

TEST_CASE("chapter: ch16 under mpirun, a frozen rank ends the launch, named by a peer's bounded wait", "[ch16][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch16_fault_tolerance", 3, std::string(kMpiSmall) + "--comm-timeout 3 --fail 2@4:freeze");
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK(mpi_has(run.output, "rank 2 of 3: --fail 2@4:freeze: this process stops answering at the start of step 4"));
  CHECK(mpi_has(run.output, "then rank 2 did not answer within"));
  CHECK_FALSE(mpi_has(run.output, "checks passed"));
}

TEST_CASE("chapter: ch16's restart flags belong to --comm mpi, and there a --join without a checkpoint, --zero and "
          "--detect-timeout are refused (exit 2)",
          "[ch16]") {
  const std::pair<const char*, const char*> refused[] = {
      {"--ranks 4 --save-checkpoint ck", "--save-checkpoint: under mpirun only"},
      {"--ranks 4 --resume ck", "--resume: under mpirun only"},
      {"--comm mpi --join 1@3", "--join 1@3: under mpirun a join ends the launch"},
      {"--comm mpi --join 0@3 --save-checkpoint ck", "--join 0@3: under mpirun the process that joins is the next rank"},
      {"--comm mpi --zero", "--zero: under threads only"},
      {"--comm mpi --detect-timeout 1", "--comm-timeout"},
      {"--comm mpi --checkpoint-every 2", "--checkpoint-every: with --save-checkpoint"},
  };
  for (const auto& [flags, said] : refused) {
    auto run = dpt_test::run_program("ch16_fault_tolerance", std::string("--quiet --steps 8 ") + flags);
    INFO(flags << ": " << run.output);
    CHECK(run.exit_code == 2);
    CHECK(dpt_test::lines_in(run.output) == 1);
    CHECK(mpi_has(run.output, said));
  }
}
