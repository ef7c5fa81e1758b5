// test_ch05_batch_norm.cpp — chapter 05 with batch norm: buckets all-reduced
// during backward alongside chapter 03's SyncBatchNorm, whose own
// all-reduces run inside the same backward. --batchnorm sync must still be
// one device's step (threads and mpirun); local reports its gap; batch norm
// with gradient accumulation is refused (each micro-batch would be
// normalized apart).
#include "support/catch.h"

#include "dpt/comm.h"
#include "support/run_program.h"

using namespace dpt;

TEST_CASE("chapter: --batchnorm sync with buckets passes the step check, local reports its gap",
          "[ch05][batch_norm]") {
  auto sync = dpt_test::run_program("ch05_bucketing", "--ranks 4 --steps 12 --quiet --batchnorm sync");
  INFO(dpt_test::summary_line(sync.output));
  CHECK(sync.exit_code == 0);
  CHECK_THAT(sync.output, contains_text("\u2714 synced gradient = one device's"));
  auto local = dpt_test::run_program("ch05_bucketing", "--ranks 4 --steps 12 --quiet --batchnorm local");
  INFO(dpt_test::summary_line(local.output));
  CHECK(local.exit_code == 0);
  CHECK_THAT(local.output, contains_text("\u00b7 local BatchNorm"));
}

TEST_CASE("chapter: --batchnorm sync with buckets under mpirun -np 2 passes the step check", "[ch05][batch_norm][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  auto run = dpt_test::run_mpi("ch05_bucketing", 2, "--comm mpi --comm-timeout 20 --steps 12 --quiet --batchnorm sync");
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("\u2714 synced gradient = one device's"));
}

TEST_CASE("chapter: --batchnorm with --accumulate 2 is refused in one line, exit 2", "[ch05][batch_norm]") {
  auto run = dpt_test::run_program("ch05_bucketing", "--batchnorm sync --accumulate 2");
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.output, contains_text("--accumulate") && contains_text("--batchnorm"));
}
