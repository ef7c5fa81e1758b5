// test_ch05_batch_norm.cpp — chapter 05 with batch norm: buckets all-reduced
// during backward alongside chapter 03's SyncBatchNorm, whose own
// all-reduces run inside the same backward. --batchnorm sync must still be
// one device's step (threads and mpirun); local reports its gap; batch norm
// with gradient accumulation is refused (each micro-batch would be
// normalized apart). A --load-weights file's running statistics reach every
// rank, and one of the other kind (with or without batch norm) is refused.
#include "support/catch.h"

#include "dpt/checkpoint.h"
#include "dpt/comm.h"
#include "dpt/nn.h"
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

// A --load-weights file of the small problem, with batch norm (its running
// statistics set away from their start, mean 0 and var 1) or without.
namespace {
std::string weights_file(bool batch_norm) {
  dpt::Rng rng(3);
  dpt::MLP model({16, 8, 4}, dpt::Device::host(), rng, batch_norm);
  for (const dpt::BatchNorm1d& norm : model.norms()) {
    dpt::BatchNormRunning running = norm.running;  // handles
    for (int64_t i = 0; i < running.mean.numel(); ++i) running.mean.data()[i] = 0.5f + 0.25f * float(i), running.var.data()[i] = 3.0f;
  }
  const std::string path = dpt_test::temp_path(batch_norm ? "ch05_with_bn.safetensors" : "ch05_without_bn.safetensors");
  dpt::save_weights(path, model.named_state());
  return path;
}
const char* const kSmall = "--data synthetic --model 16-8-4 --samples 256 --steps 4 --quiet ";
}  // namespace

TEST_CASE("chapter: a weights file with or without batch norm into a model of the other kind: one line, exit 2",
          "[ch05][batch_norm]") {
  const std::string with = weights_file(true), without = weights_file(false);
  for (const char* program : {"ch05_bucketing", "ch03_naive_dp"}) {
    auto into_norm = dpt_test::run_program(program, std::string(kSmall) + "--batchnorm sync --load-weights " + without);
    INFO(program << "\n" << into_norm.output);
    CHECK(into_norm.exit_code == 2);
    CHECK_THAT(into_norm.output, contains_text("--load-weights: '" + without +
                                               "' holds no batch-norm parameters: made without --batchnorm?"));
    auto into_plain = dpt_test::run_program(program, std::string(kSmall) + "--load-weights " + with);
    INFO(into_plain.output);
    CHECK(into_plain.exit_code == 2);
    CHECK_THAT(into_plain.output, contains_text("--load-weights: '" + with + "' holds batch-norm parameters (bn0."));
  }
  std::remove(with.c_str());
  std::remove(without.c_str());
}

TEST_CASE("chapter: a loaded file's running statistics are every rank's: --batchnorm sync keeps them equal, local "
          "reports how far they drift", "[ch05][batch_norm]") {
  const std::string with = weights_file(true);
  // 4 steps leave 0.9^4 = 66 % of the start in the statistics: a rank that did not get the file's is 1.3 and more apart.
  for (const char* program : {"ch05_bucketing", "ch03_naive_dp"}) {
    auto sync = dpt_test::run_program(program, std::string(kSmall) + "--ranks 3 --batchnorm sync --load-weights " + with);
    INFO(program << "\n" << sync.output);
    CHECK(sync.exit_code == 0);
    CHECK_THAT(sync.output, contains_text("\u2714 batch norm's running mean and var, every rank's vs rank 0's: max "
                                          "|difference|: 0 (expected <= 0)"));
  }
  auto local = dpt_test::run_program("ch05_bucketing", std::string(kSmall) + "--ranks 3 --batchnorm local --load-weights " + with);
  INFO(local.output);
  CHECK(local.exit_code == 0);
  CHECK_THAT(local.output, contains_text("\u00b7 batch norm's running mean and var, every rank's vs rank 0's"));
  std::remove(with.c_str());
}

// Apart from the case above, and named "mpirun": the sanitizer runs keep
// Open MPI's processes out of LeakSanitizer's and ThreadSanitizer's way by
// name and label (Open MPI keeps memory until exit and starts threads at load).
TEST_CASE("chapter: under mpirun -np 2 a loaded file's running statistics are every rank's (--batchnorm sync)",
          "[ch05][batch_norm][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  const std::string with = weights_file(true);
  auto run = dpt_test::run_mpi("ch05_bucketing", 2, std::string("--comm mpi --comm-timeout 20 ") + kSmall +
                                                        "--batchnorm sync --load-weights " + with);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("\u2714 batch norm's running mean and var, every rank's vs rank 0's"));
  std::remove(with.c_str());
}
