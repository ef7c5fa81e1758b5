// test_ch07_fault.cpp — chapter 07's faults (zero_fault.h): --fail is a crash
// under mpirun, nothing else, and the killed rank dies after the checkpoint of
// the steps before its step is sealed; --max-loss stops at the first step
// above it (exit 5, before any later save); --skip-batch's cursor draws every
// batch not skipped, in order, once. What a supervisor does next:
// tests/mpi/dptrun/test_dptrun.py.
#include "support/catch.h"
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "support/run_program.h"
#include "zero_fault.h"

using dpt::ch07::batch_of_step;

namespace {
const std::string kFaultRun = "--quiet --no-verify --model 32-15-4 --samples 256 --optimizer adamw --lr 0.01 "
                              "--batch 6 --steps 10";
}  // namespace

TEST_CASE("chapter: ch07 --fail is a crash under mpirun only (other kinds, --join, threads refused), bad --max-loss "
          "and --skip-batch too (exit 2)",
          "[ch07]") {
  const std::pair<const char*, const char*> refused[] = {
      {"--ranks 4 --fail 2@5", "only under mpirun (--comm mpi)"},
      {"--ranks 4 --fail 2@5:freeze", "under mpirun only crash"},
      {"--ranks 4 --fail 1@3:bitflip", "under mpirun only crash"},
      {"--ranks 4 --join 1@3", "--join 1@3"},
      {"--ranks 4 --fail 2@5:melt", "unknown kind 'melt'"},
      {"--ranks 4 --max-loss nan", "--max-loss"},
      {"--ranks 4 --max-loss 0", "--max-loss"},
      {"--ranks 4 --skip-batch -1", "--skip-batch"},
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

TEST_CASE("batch_of_step: with batches skipped, the steps draw every other batch once, in order", "[ch07]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> skipped;
    const int count = int(gen() % 6);
    for (int i = 0; i < count; ++i) skipped.push_back(int64_t(gen() % 20));  // repeats and any order allowed
    const std::set<int64_t> out(skipped.begin(), skipped.end());
    std::vector<int64_t> kept;  // the oracle: 0, 1, 2, ... without the skipped ones
    for (int64_t b = 0; int64_t(kept.size()) < 30; ++b)
      if (out.count(b) == 0) kept.push_back(b);
    INFO("trial " << trial << ", " << out.size() << " batches skipped");
    for (int64_t step = 0; step < 30; ++step) REQUIRE(batch_of_step(step, skipped) == kept[std::size_t(step)]);
  }
  CHECK(batch_of_step(5, {}) == 5);
}

TEST_CASE("chapter: ch07 --max-loss stops at the first step whose loss is above it, exit 5, before any later save",
          "[ch07]") {
  namespace fs = std::filesystem;
  // lr 0.1: the loss jumps about.
  const std::string run = "--ranks 4 --quiet --no-verify --model 32-15-4 --samples 256 --optimizer adamw --lr 0.1 "
                          "--batch 6 --steps 12";
  const std::string metrics = dpt_test::temp_path("ch07_spike.jsonl");
  auto free_run = dpt_test::run_program("ch07_zero", run + " --metrics " + metrics);
  INFO(dpt_test::summary_line(free_run.output));
  REQUIRE(free_run.exit_code == 0);
  std::vector<double> losses;
  for (const auto& line : dpt_test::read_jsonl(metrics))
    if (line.contains("loss") && line["loss"].is_number()) losses.push_back(line["loss"].get<double>());
  REQUIRE(losses.size() == 12);
  // The bound: just under the loss of the first step that rises above every step before it, past step 2.
  int64_t spike = -1;
  for (std::size_t s = 3; s < losses.size() && spike < 0; ++s) {
    double before = 0;
    for (std::size_t t = 0; t < s; ++t) before = std::max(before, losses[t]);
    if (losses[s] > before + 0.02) spike = int64_t(s);
  }
  if (spike < 0) DPT_SKIP("no step of this run rises above every step before it: nothing to stop at");
  const double bound = losses[std::size_t(spike)] - 0.01;
  const std::string dir = dpt_test::temp_path("ch07_spike_ck");
  fs::remove_all(dir);
  auto stopped = dpt_test::run_program("ch07_zero", run + " --save-checkpoint " + dir + " --checkpoint-every 1 " +
                                                        "--max-loss " + std::to_string(bound));
  INFO(stopped.output);
  CHECK(stopped.exit_code == 5);
  CHECK_THAT(stopped.output, contains_text("loss spike at step " + std::to_string(spike) + " (batch " +
                                           std::to_string(spike) + ")"));
  std::ifstream latest(dir + "/latest");
  std::string named;
  latest >> named;
  char expected[32];
  std::snprintf(expected, sizeof expected, "step-%08lld", static_cast<long long>(spike));
  CHECK(named == expected);  // the state before the spike's step, and nothing later
  fs::remove_all(dir);
  std::remove(metrics.c_str());
}
