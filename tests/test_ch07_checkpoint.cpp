// test_ch07_checkpoint.cpp — chapter 07 resumed from sharded checkpoints (the
// core's dpt/sharded_checkpoint.h): bit for bit at any stage, re-sharded from
// 4 ranks to 2 and 3 (threads and mpirun), a broken newest checkpoint named
// while the one before still resumes.
#include "support/catch.h"
#include <filesystem>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/data_parallel.h"
#include "support/ch07_weights.h"
#include "support/run_program.h"

using namespace dpt;
using dpt_test::read_flat;

// ----------------------------------------------------------------------------
// sharded checkpoints (the core's dpt/sharded_checkpoint.h)

namespace {
std::string fresh_dir(const std::string& name) {
  std::string dir = dpt_test::temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Runs ch07 with `flags` on `ranks` threads (or processes), expects success, returns the flat weights.
std::vector<float> run_and_read(int ranks, const std::string& flags, bool mpi = false) {
  std::string path = dpt_test::temp_path("ch07_ck_" + std::to_string(ranks) + ".safetensors");
  std::string args = "--quiet --no-verify --model 32-15-4 --samples 256 --optimizer adamw --weight-decay 0.05 "
                     "--lr 0.01 " + flags + " --save-weights " + path;
  auto run = mpi ? dpt_test::run_mpi("ch07_zero", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(ranks << " ranks " << flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  return read_flat(path);
}
}  // namespace

TEST_CASE("chapter: a run resumed from a sharded checkpoint continues bit for bit, at any stage", "[ch07]") {
  std::string dir = fresh_dir("ch07_resume");
  std::vector<float> straight = run_and_read(4, "--batch 8 --steps 12 --stage 0");
  run_and_read(4, "--batch 8 --steps 5 --stage 2 --save-checkpoint " + dir + " --checkpoint-every 2");  // saves 2, 4, 5
  // Parameters, both moments, the step count and the data order all come back: not one bit differs.
  CHECK(max_abs_difference(run_and_read(4, "--batch 8 --steps 12 --stage 3 --resume " + dir), straight) == 0);
  CHECK(max_abs_difference(run_and_read(4, "--batch 8 --steps 12 --stage 1 --resume " + dir + "/step-00000004"), straight) == 0);
  // The consolidated file holds the weights of step 5, in PyTorch's layout (what load_weights reads).
  std::string out = dpt_test::temp_path("ch07_consolidated.safetensors");
  auto consolidate = dpt_test::run_program("ch07_zero", "--consolidate " + dir + " --save-weights " + out);
  REQUIRE(consolidate.exit_code == 0);
  CHECK(max_abs_difference(read_flat(out), run_and_read(4, "--batch 8 --steps 5 --stage 0")) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("chapter: a checkpoint of 4 ranks resumes on 2 and 3 (re-sharded) like the unsharded run", "[ch07]") {
  std::string dir = fresh_dir("ch07_reshard");
  std::vector<float> straight = run_and_read(4, "--batch 6 --steps 12 --stage 0");
  run_and_read(4, "--batch 6 --steps 5 --stage 3 --save-checkpoint " + dir);
  // Same global batch (24) on fewer ranks: the sums change order, so the single-device bound applies.
  CHECK(max_abs_difference(run_and_read(2, "--batch 12 --steps 12 --stage 3 --resume " + dir), straight) < kSingleDeviceTolerance);
  CHECK(max_abs_difference(run_and_read(3, "--batch 8 --steps 12 --stage 1 --resume " + dir), straight) < kSingleDeviceTolerance);
  // A different run is refused by name: another global batch.
  auto other = dpt_test::run_program("ch07_zero", "--ranks 2 --quiet --model 32-15-4 --samples 256 --optimizer adamw "
                                                  "--weight-decay 0.05 --lr 0.01 --batch 8 --steps 12 --resume " + dir);
  CHECK(other.exit_code == 1);
  CHECK_THAT(other.output, contains_text("global_batch 24") && contains_text("global_batch 16"));
  std::filesystem::remove_all(dir);
}

// Its own test case, with "mpirun" in the name: CI runs those apart (LeakSanitizer off: Open MPI keeps memory).
TEST_CASE("chapter: under mpirun -np 2, a checkpoint of 4 rank threads resumes re-sharded like the unsharded run",
          "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  std::string dir = fresh_dir("ch07_reshard_mpi");
  std::vector<float> straight = run_and_read(4, "--batch 6 --steps 12 --stage 0");
  run_and_read(4, "--batch 6 --steps 5 --stage 3 --save-checkpoint " + dir);
  CHECK(max_abs_difference(run_and_read(2, "--batch 12 --steps 12 --stage 2 --resume " + dir, true), straight) <
        kSingleDeviceTolerance);
  std::filesystem::remove_all(dir);
}

TEST_CASE("chapter: a broken newest checkpoint is an error naming the file, and the one before still resumes", "[ch07]") {
  namespace fs = std::filesystem;
  std::vector<float> straight = run_and_read(2, "--batch 8 --steps 8 --stage 0");
  const std::string resume = "--quiet --no-verify --ranks 2 --model 32-15-4 --samples 256 --optimizer adamw "
                             "--weight-decay 0.05 --lr 0.01 --batch 8 --steps 8 --resume ";
  auto truncate = [](const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); };
  struct Breakage { const char* what; std::function<void(const std::string&)> apply; const char* named; };
  for (const Breakage& b : {Breakage{"shard missing", [](const std::string& s) { fs::remove(s + "/shard-00001-of-00002.safetensors"); },
                                     "shard-00001-of-00002"},
                            Breakage{"shard truncated", [&](const std::string& s) { truncate(s + "/shard-00000-of-00002.safetensors"); },
                                     "shard-00000-of-00002"},
                            Breakage{"no completion marker", [](const std::string& s) { fs::remove(s + "/COMPLETE"); },
                                     "COMPLETE"}}) {
    INFO(b.what);
    std::string dir = fresh_dir("ch07_broken");
    run_and_read(2, "--batch 8 --steps 4 --stage 2 --save-checkpoint " + dir + " --checkpoint-every 3");  // 3 and 4
    b.apply(dir + "/step-00000004");
    auto broken = dpt_test::run_program("ch07_zero", resume + dir + "/step-00000004");
    CHECK(broken.exit_code == 1);
    CHECK_THAT(broken.output, contains_text(b.named));
    CHECK(max_abs_difference(run_and_read(2, "--batch 8 --steps 8 --stage 2 --resume " + dir + "/step-00000003"), straight) == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("chapter: a checkpoint from 4 ranks resumed on 2 passes every verdict (stage 0 resumes from it too)", "[ch07]") {
  // The stage-0 comparison run must start where the resumed run started; from
  // the master copy on 2 ranks it differed by 1e-6 and printed a false ✘.
  const std::string dir = dpt_test::temp_path("ch07_resume_verdicts");
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  auto save = dpt_test::run_program("ch07_zero", "--ranks 4 --batch 8 --steps 6 --quiet --stage 3 --save-checkpoint " + dir);
  INFO(dpt_test::summary_line(save.output));
  REQUIRE(save.exit_code == 0);
  auto resume = dpt_test::run_program("ch07_zero", "--ranks 2 --batch 16 --steps 10 --quiet --stage 3 --resume " + dir);
  INFO(dpt_test::summary_line(resume.output));
  CHECK(resume.exit_code == 0);
  CHECK_THAT(resume.output, contains_text("max |w_stage3 - w_stage0|: 0 ") && contains_text("over 4 of 10 steps"));
  CHECK_THAT(resume.output, !contains_text("started from the master copy"));
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}
