// test_ch15_pipeline.cpp — chapter 15's pipeline axis (--pp) on one grid:
// every 8-rank layout of a small GPT (4 blocks of 8 heads, width 32, context
// 16) passes every verdict, with and without --sp; the per-stage traffic of
// 1F1B by its formula; an uneven split of the blocks; every rank's three
// groups, TP innermost, then DP, then PP; a layout that does not divide the model
// is one line, exit 2; under mpirun -np 8; chapter 14's weights files read
// and written on a pipeline, and trained equal to chapter 14's model;
// run_layout (the planner's entry) runs one layout and reports its traffic.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ch15_flags.h"
#include "dpt/comm.h"
#include "layout_run.h"
#include "support/findings.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "support/weights_gap.h"

namespace {
const std::string kPipeProgram = "ch15_3d_parallel";
const std::string kPipeShape = "--data synthetic --layers 4 --heads 8 --width 32 --context 16 --batch 4 --quiet ";
const std::string kPipeSmall = kPipeShape + "--steps 2 --eval-batches 0 ";  // the held-out loss is not judged here
const char* const kPipeStepCheck = "\u2714 step 0: the shares' gradients, gathered and averaged = one device's";
const char* const kPipeBubble = "on chapter 13's clock: bubble = (P-1)/(M+P-1)";

// The layouts of 8 ranks the issue names (tp 8: the 8 heads allow it).
const char* const kLayouts[] = {"--tp 2 --pp 2 --dp 2", "--tp 4 --pp 2", "--tp 2 --dp 4", "--pp 4 --dp 2", "--tp 8"};
}  // namespace

TEST_CASE("chapter: ch15 on every 8-rank layout, with and without --sp, passes every verdict", "[ch15]") {
  for (const char* layout : kLayouts)
    for (const char* sp : {"", " --sp"}) {
      const std::string args = std::string(layout) + sp;
      if (*sp && args.find("--tp") == std::string::npos) continue;  // --sp needs a TP group
      auto run = dpt_test::run_program(kPipeProgram, kPipeSmall + "--ranks 8 " + args);
      INFO(args << "\n" << run.output);
      CHECK(run.exit_code == 0);
      CHECK(run.output.find(kPipeStepCheck) != std::string::npos);
      CHECK(run.output.find("\u2714 step 1: the shares' gradients") != std::string::npos);
      CHECK(run.output.find("\u2714 every rank's gathered model holds the same weights") != std::string::npos);
      if (args.find("--pp") != std::string::npos) CHECK(run.output.find(std::string("\u2714 the stages' schedule (1f1b) ") + kPipeBubble) != std::string::npos);
      CHECK(run.output.find("\u2718") == std::string::npos);
    }
}

TEST_CASE("chapter: ch15 pipelines count 2 TP all-reduces per block of the stage per micro-batch, of B/M·T·C floats",
          "[ch15]") {
  // tp 2 pp 2 dp 2, M = 4: each stage 2 of the 4 blocks, 2·2·4 = 16 all-reduces each
  // way; B/M·T·C = 4/4·16·32 = 512 floats each (the formula, written here); to its
  // one neighbour stage each rank sends 4 micro-batches of 512 floats, 8192 bytes.
  auto run = dpt_test::run_program(kPipeProgram, kPipeSmall + "--ranks 8 --tp 2 --pp 2 --dp 2 --micro-batches 4");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  for (const char* line : {"\u2714 forward: TP all-reduces per step = 2 per block x blocks of the stage x M = 16",
                           "\u2714 backward: TP all-reduces per step = 2 per block x blocks of the stage x M = 16",
                           "\u2714 forward: floats per TP all-reduce = B/M·T·C = 512",
                           "\u2714 backward: floats per TP all-reduce = B/M·T·C = 512",
                           "\u2714 DP all-reduce bytes per step = 4 x parameters per rank",
                           "\u2714 PP bytes sent per step per rank = M x B/M·T·C floats x 4 to each neighbour stage (rank 0: 8192)",
                           "bubble = (P-1)/(M+P-1) = 20.00 %"})  // (2−1)/(4+2−1)
    CHECK(run.output.find(line) != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch15 with GPipe, more micro-batches than stages, and blocks that do not split evenly", "[ch15]") {
  for (const std::string& args : {kPipeSmall + "--ranks 4 --pp 4 --schedule gpipe --micro-batches 2",
                                  std::string("--data synthetic --layers 3 --heads 4 --width 32 --context 16 --batch 4 --quiet "
                                  "--steps 2 --eval-batches 0 --ranks 4 --tp 2 --pp 2 --sp")}) {
    auto run = dpt_test::run_program(kPipeProgram, args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.output.find(kPipeStepCheck) != std::string::npos);
    CHECK(run.output.find("\u2714 parameters per rank = ") != std::string::npos);
    CHECK(run.output.find(kPipeBubble) != std::string::npos);
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

TEST_CASE("chapter: --check-groups prints every rank's TP, DP and PP groups, TP innermost, then DP, then PP", "[ch15]") {
  auto run = dpt_test::run_program(kPipeProgram, kPipeShape + "--ranks 8 --tp 2 --dp 2 --pp 2 --steps 0 --check-groups");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  // TP innermost, then DP, then PP: ranks 4-7 are stage 1; in it, 4 and 5 one TP group, 6 and 7 the other.
  for (const char* line : {"rank 0: TP group [0 1] as t=0, DP group [0 2] as d=0, PP group [0 4] as p=0",
                           "rank 5: TP group [4 5] as t=1, DP group [5 7] as d=0, PP group [1 5] as p=1",
                           "rank 6: TP group [6 7] as t=0, DP group [4 6] as d=1, PP group [2 6] as p=1"})
    CHECK(run.output.find(line) != std::string::npos);
}

TEST_CASE("chapter: a pipeline layout that does not divide the ranks, the blocks or the batch is one line and exit 2",
          "[ch15]") {
  struct Bad { std::string args; const char* says; };
  for (const Bad& bad : {Bad{"--ranks 8 --pp 3", "--pp 3 does not divide the 8 ranks"},
                         Bad{"--ranks 8 --pp 8", "--pp 8 exceeds the 4 blocks (--layers)"},
                         Bad{"--ranks 8 --pp 2 --micro-batches 3", "--micro-batches 3 does not divide the batch of 4"},
                         Bad{"--ranks 8 --tp 2 --pp 2 --dp 4", "--tp 2 x --dp 4 x --pp 2 = 16 ranks, but the run has 8"},
                         Bad{"--ranks 8 --pp 2 --tp 3", "--tp 3 does not divide the 8 ranks over --pp 2"},
                         Bad{"--ranks 8 --pp 2 --schedule zigzag", "--schedule"}}) {
    auto run = dpt_test::run_program(kPipeProgram, kPipeSmall + bad.args);
    INFO(bad.args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') <= 1);
  }
}

TEST_CASE("chapter: under mpirun -np 8 (tp 2 x pp 2 x dp 2) ch15's gradients equal one device's", "[ch15][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  // ASAN_OPTIONS: Open MPI keeps allocations until exit (as test_ch12_chapter.cpp says).
  auto run = dpt_test::run_command("ASAN_OPTIONS=detect_leaks=0 " + dpt_test::launcher() + " -np 8 " +
                                   dpt_test::program_path(kPipeProgram) + " --comm mpi --comm-timeout 60 " + kPipeSmall +
                                   "--tp 2 --pp 2 --dp 2");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find(kPipeStepCheck) != std::string::npos);
  CHECK(run.output.find(kPipeBubble) != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: a pipeline reads and writes chapter 14's weights file and trains as chapter 14 does", "[ch15]") {
  const std::string ch14 = dpt_test::temp_path("ch15_pp_from_ch14.safetensors"),
                    piped = dpt_test::temp_path("ch15_pp_trained.safetensors"),
                    round = dpt_test::temp_path("ch15_pp_round.safetensors");
  // 2 blocks, one per stage. SGD: the update is linear in the gradient, so runs
  // whose gradients agree to float rounding stay within ~1e-6 after 6 steps; a
  // micro-batch counted twice or lost is off by lr·|g| ~ 1e-3 or more.
  const std::string shape = "--data synthetic --layers 2 --heads 4 --width 32 --context 16 --batch 2 --quiet ";
  const std::string train = shape + "--steps 6 --optimizer sgd --lr 0.5 --sample 0 --eval-batches 0 ";
  auto a = dpt_test::run_program("ch14_language_model", train + "--ranks 2 --save-weights " + ch14);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  // dp 2 pipelines of 2 sequences in 2 micro-batches: chapter 14's global batch of 2 x 2, from the same seed.
  auto b = dpt_test::run_program(kPipeProgram, train + "--ranks 8 --tp 2 --pp 2 --dp 2 --save-weights " + piped);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK(dpt_test::weights_gap(ch14, piped) <= 1e-5);
  auto c = dpt_test::run_program(kPipeProgram, shape + "--ranks 8 --pp 2 --tp 4 --steps 0 --load-weights " + ch14 +
                                                   " --save-weights " + round);
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  CHECK(dpt_test::weights_gap(ch14, round) == 0);  // cut into stages and tp 4 shares and put back: bit for bit
  for (const std::string& p : {ch14, piped, round}) std::remove(p.c_str());
}

TEST_CASE("run_layout: one layout trained silently, the same losses on every rank, its stage's traffic", "[ch15]") {
  Ch15Flags f;
  f.lm.shape.layers = 3, f.lm.shape.heads = 4, f.lm.shape.width = 32, f.lm.shape.context = 16;
  f.lm.batch = 4, f.lm.steps = 2, f.lm.eval_batches = 0;
  f.tp = 2, f.pp = 2;  // 4 ranks: dp 1; M = pp = 2; stage 0 holds blocks 0 and 1, stage 1 block 2
  dpt_test::Findings found;
  std::vector<std::vector<double>> losses(4);
  dpt_test::run_ranks(4, [&](dpt::Context& ctx) {
    const Corpus text = load_text("synthetic", f.lm.shape.context, f.lm.seed);
    Ch15Flags mine = f;
    mine.lm.shape.vocab = text.vocab();
    const dpt::ch15::TpRun run = dpt::ch15::run_layout(ctx, mine, text);
    const double blocks = ctx.rank < 2 ? 2 : 1;  // r = t + 2·p: ranks 0, 1 are stage 0
    if (run.forward.calls != 2 * blocks * 2 || run.backward.calls != 2 * blocks * 2)
      found.add("rank " + std::to_string(ctx.rank) + ": " + std::to_string(run.forward.calls) + " forward and " +
                std::to_string(run.backward.calls) + " backward all-reduces, expected 2 per block x M each way");
    if (!(run.seconds > 0)) found.add("rank " + std::to_string(ctx.rank) + ": no wall time measured");
    losses[std::size_t(ctx.rank)] = run.train_loss;
  });
  found.require_none();
  for (const std::vector<double>& l : losses) {
    REQUIRE(l.size() == 2);
    CHECK(std::isfinite(l[0]));
    CHECK(l == losses[0]);  // every stage learns the last stage's loss: the same value on every rank
  }
}
