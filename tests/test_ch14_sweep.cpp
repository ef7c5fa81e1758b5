// test_ch14_sweep.cpp — chapter 14's --batch-sweep (lm_sweep.h) on a tiny GPT
// (context 4) and a text where each letter follows the one before it with
// probability 0.7 (1.57 bits per letter given the one before, 3 bits for a
// guess): it runs on one rank without being told, prints its tables, writes
// its plot, every verdict a ✔; and the flags it refuses. The sweep's bookkeeping is tested once, in
// core/test_batch_sweep.cpp.
#include "support/catch.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "dpt/nn.h"
#include "lm_sweep.h"
#include "lm_training.h"
#include "support/run_program.h"

namespace {
// 20000 letters a..h: the next is the one after the last (h wraps to a) 7 times
// in 10, else any of the 8.
std::string chain_text() {
  const std::string path = dpt_test::temp_path("ch14_sweep_chain.txt");
  std::ofstream out(path);
  dpt::Rng rng(5);
  uint64_t letter = 0;
  for (int i = 0; i < 20000; ++i) {
    letter = rng.below(10) < 7 ? (letter + 1) % 8 : rng.below(8);
    out << char('a' + letter);
  }
  return path;
}
const std::string kTiny = "--layers 1 --width 16 --heads 2 --context 4 ";
}  // namespace

TEST_CASE("chapter: ch14 --batch-sweep on a tiny GPT runs on one rank, prints its tables, writes its plot, every "
          "verdict a ✔", "[ch14]") {
  const std::string text = chain_text(), plot = dpt_test::temp_path("ch14_sweep.svg");
  auto run = dpt_test::run_program("ch14_language_model", "--batch-sweep --data text:" + text + " " + kTiny +
                                                              "--sweep-max-batch 32 --target-bits 2.0 "
                                                              "--sweep-max-steps 400 --plot " + plot);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);  // a run on the default 4 ranks would have stopped: the sweep refuses more than one
  for (const char* line : {"3. Steps to a target held-out loss against the global batch",
                           "steps to 2.000 bits at each rate tried", "steps to the target against the global batch",
                           "critical batch E_min / S_min", "✔ below the critical batch",
                           "✔ the linear rule with warm-up reaches the target"})
    CHECK(run.output.find(line) != std::string::npos);
  CHECK(run.output.find("Training on") == std::string::npos);  // the sweep instead of the lesson
  std::ifstream in(plot);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* batch : {"4", "8", "16", "32"})  // every batch reached the target: one marker each
    CHECK(svg.find(std::string("data-series=\"tuned per batch\" data-x=\"") + batch + "\"") != std::string::npos);
  std::remove(plot.c_str());
  std::remove(text.c_str());
}

TEST_CASE("chapter: ch14 refuses the lesson's flags beside --batch-sweep, the sweep's without it, more ranks (exit 2)",
          "[ch14]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch-sweep --ranks 2", "--ranks: --batch-sweep runs on one rank"},
      {"--batch-sweep --batch 8", "--batch: not used by --batch-sweep"},
      {"--batch-sweep --metrics m.jsonl", "--metrics: not used by --batch-sweep"},
      {"--batch-sweep --sweep-max-batch 24", "--sweep-max-batch: expects a power of two"},
      {"--batch-sweep --target-bits 0", "--target-bits"},
      {"--target-bits 2", "--target-bits: only used by --batch-sweep"},
      {"--sweep-max-steps 10", "--sweep-max-steps: only used by --batch-sweep"},
  };
  for (const auto& [args, says] : cases) {
    auto run = dpt_test::run_program("ch14_language_model", "--data synthetic " + kTiny + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(says) != std::string::npos);
  }
}

TEST_CASE("ch14 sweep: a run takes lr_at(step) at each step: a rate of 0 after the first step leaves one step's "
          "weights", "[ch14]") {
  Ch14Flags f;
  f.shape.layers = 1, f.shape.heads = 2, f.shape.width = 16, f.shape.context = 8;
  const Corpus text = load_text("synthetic", f.shape.context, f.seed);
  f.shape.vocab = text.vocab();
  dpt::Rng rng(f.seed);
  const Gpt start(f.shape, dpt::Device::host(), rng);
  const std::vector<float> initial = flat_values(start);
  const dpt::SweepTarget never = {0, /*higher_is_better=*/false, "--target-bits", 1, 3, " bits"};
  auto run = [&](const std::function<float(int64_t)>& lr_at, int64_t steps) {
    return train_gpt_to_target(text, f, initial, dpt::Device::host(), 4, lr_at, steps, never);
  };
  const dpt::TargetRun one = run([](int64_t) { return 0.01f; }, 1);
  const dpt::TargetRun first_only = run([](int64_t s) { return s == 0 ? 0.01f : 0.0f; }, 3);
  const dpt::TargetRun three = run([](int64_t) { return 0.01f; }, 3);
  CHECK(first_only.steps_taken == 3);
  CHECK_FALSE(first_only.reached());
  CHECK(first_only.score == one.score);  // AdamW at rate 0 moves nothing, its decay (1 - 0·λ) included
  CHECK(three.score != one.score);       // and the rate of steps 2 and 3 is what moved these
}
