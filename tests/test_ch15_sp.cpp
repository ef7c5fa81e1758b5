// test_ch15_sp.cpp — chapter 15's sequence parallelism (--sp) on a small GPT
// (2 blocks of 4 heads, width 32, context 16): the step check on tp 2 x dp 2
// and tp 4; per step 2 all-gathers and 2 reduce-scatters per block each way,
// no all-reduce, their ring bytes those of tensor parallelism's all-reduces;
// the LayerNorm/residual region's ledger bytes ÷ tp; trained equal to chapter
// 14's unsplit model; under mpirun -np 4 too; --sp where it cannot apply is
// one line, exit 2.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "dpt/checkpoint.h"
#include "dpt/comm.h"
#include "support/run_program.h"
#include "support/weights_gap.h"

namespace {
const std::string kSpProgram = "ch15_3d_parallel";
const std::string kSpShape = "--data synthetic --layers 2 --heads 4 --width 32 --batch 2 --quiet ";
const std::string kSpSmall = kSpShape + "--context 16 --steps 6 --eval-every 6 --eval-batches 1 ";

}  // namespace

TEST_CASE("chapter: ch15 --sp on tp 2 x dp 2 and tp 4 gives one device's gradients and 1/tp of the region's activations",
          "[ch15]") {
  for (const char* layout : {"--ranks 4 --tp 2 --dp 2 --sp", "--ranks 4 --tp 4 --sp"}) {
    auto run = dpt_test::run_program(kSpProgram, kSpSmall + layout);
    INFO(layout << "\n" << run.output);
    CHECK(run.exit_code == 0);
    CHECK(run.output.find("\u2714 step 0: the shares' gradients, gathered and averaged = one device's") != std::string::npos);
    CHECK(run.output.find("\u2714 step 5: the shares' gradients, gathered and averaged = one device's") != std::string::npos);
    CHECK(run.output.find("\u2714 --sp: embeddings, LayerNorms and residual adds held per rank x tp = without --sp") !=
          std::string::npos);
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

TEST_CASE("chapter: ch15 --sp moves 2 all-gathers and 2 reduce-scatters per block each way, the all-reduces' bytes",
          "[ch15]") {
  auto run = dpt_test::run_program(kSpProgram, kSpSmall + "--ranks 2 --tp 2 --sp");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  // L = 2 blocks, B·T·C = 2·16·32 = 1024 floats, tp 2. Ring bytes per rank of
  // 2 all-reduces per block: 2L · 2(tp−1)/tp · B·T·C · 4 = 4 · 1 · 4096 = 16384.
  for (const char* pass : {"forward", "backward"})
    for (const char* line : {": --sp all-gathers per step = 2 per block x L = 4",
                                    ": --sp reduce-scatters per step = 2 per block x L = 4",
                                    ": --sp TP all-reduces in the pass = 0", ": floats per all-gather = B·T·C/tp = 512",
                                    ": floats per reduce-scatter = B·T·C = 1024",
                                    ": ring bytes per rank = tensor parallelism's 2 all-reduces per block"})
      CHECK(run.output.find("\u2714 " + std::string(pass) + line) != std::string::npos);
  CHECK(run.output.find("2L·2(tp−1)/tp·B·T·C·4 = 16384") != std::string::npos);
  // Every replicated tensor once (embeddings, LayerNorms, c_proj biases, head; V = 8, synthetic), counted by hand.
  CHECK(run.output.find("\u2714 --sp: replicated gradients summed over the TP group per step") != std::string::npos);
  CHECK(run.output.find("= 1472 floats") != std::string::npos);
}

TEST_CASE("chapter: under mpirun -np 4 (tp 2 x dp 2 --sp) ch15's gradients equal one device's", "[ch15][mpi]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  // ASAN_OPTIONS: Open MPI keeps allocations until exit (as test_ch12_chapter.cpp says).
  auto run = dpt_test::run_command("ASAN_OPTIONS=detect_leaks=0 " + dpt_test::launcher() + " -np 4 " +
                                   dpt_test::program_path(kSpProgram) + " --comm mpi --comm-timeout 30 --sp " + kSpSmall);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("\u2714 step 0: the shares' gradients, gathered and averaged = one device's") != std::string::npos);
  CHECK(run.output.find("\u2714 forward: --sp all-gathers per step = 2 per block x L = 4") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch15 --sp trains to chapter 14's weights", "[ch15]") {
  const std::string ch14 = dpt_test::temp_path("ch15_sp_ch14.safetensors"),
                    sp = dpt_test::temp_path("ch15_sp_split.safetensors");
  // SGD, as test_ch15_chapter.cpp: float-rounding gradients stay within ~1e-6
  // after 6 steps; a position's gradient lost or counted twice is off by ~1e-3.
  const std::string train = kSpShape + "--context 16 --steps 6 --optimizer sgd --lr 0.5 --sample 0 --eval-batches 0 ";
  auto a = dpt_test::run_program("ch14_language_model", train + "--ranks 2 --save-weights " + ch14);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  auto b = dpt_test::run_program(kSpProgram, train + "--ranks 4 --tp 2 --dp 2 --sp --save-weights " + sp);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK(dpt_test::weights_gap(ch14, sp) <= 1e-5);
  for (const std::string& p : {ch14, sp}) std::remove(p.c_str());
}

TEST_CASE("chapter: --sp with a TP group of 1 or a context tp does not divide is one line and exit 2", "[ch15]") {
  struct BadSp { std::string args; const char* says; };
  for (const BadSp& bad : {BadSp{"--context 16 --ranks 4 --tp 1 --sp", "--sp needs --tp 2 or more"},
                           BadSp{"--context 16 --ranks 3 --sp", "--sp needs --tp 2 or more"},
                           BadSp{"--context 6 --ranks 4 --tp 4 --sp", "--sp: --tp 4 does not divide the context of 6"}}) {
    auto run = dpt_test::run_program(kSpProgram, kSpShape + "--steps 2 " + bad.args);
    INFO(bad.args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') <= 1);
  }
}
