// test_ch02_chapter.cpp — chapter 02's program, ch02_batching: its verdicts
// and exit code when every hole is right, and how it stops when the loss
// becomes nan or explodes.
#include "support/catch.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>
#include <string>

#include "dpt/verdict.h"
#include "support/run_program.h"

TEST_CASE("chapter: ch02_batching shows batch = mean of per-sample gradients, every verdict a ✔ (exit 0)", "[ch02]") {
  std::string metrics = dpt_test::temp_path("ch02.jsonl");
  auto run = dpt_test::run_program("ch02_batching", "--quiet --steps 40 --batch 16 --metrics " + metrics);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(dpt_test::read_jsonl(metrics).size() == 41);  // one line per mini-batch step, then the held-out report
  for (const char* verdict : {"✔ your per-sample gradients, as returned, vs autograd on each sample alone",
                              "✔ your per_sample_gradients: one backward pass per sample",
                              "✔ your mean of the per-sample gradients vs the batch gradient",
                              "✔ your accumulated_gradient in 3 micro-batches vs the batch gradient",
                              "✔ 16x fewer optimizer steps", "640 per-sample steps vs 40",
                              "✔ |per-sample run's loss - batched run's loss|", "✔ batched run, loss on the data set",
                              "✔ largest step loss / first step loss"})
    CHECK_THAT(run.output, contains_text(verdict));
  CHECK_THAT(run.output, contains_text("(expected <= 0.0001)"));  // the tolerance, printed as a number
  CHECK(run.output.find("✘") == std::string::npos);
  CHECK_THAT(run.output, contains_text("all 8 checks passed"));
  std::remove(metrics.c_str());
}

TEST_CASE("chapter: ch02_batching stops with a sentence and exit 1 when the loss becomes nan", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --steps 40 --lr 100");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.output, contains_text("training diverged at step"));
  CHECK(run.output.find("checks passed") == std::string::npos);
}

TEST_CASE("chapter: ch02_batching gives a ✘ and exit 3 when the loss explodes but stays finite", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --data synthetic --lr 1");  // measured: the batched loss reaches ~8e11
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ largest step loss / first step loss"));
  CHECK_THAT(run.output, contains_text("checks FAILED"));
}

TEST_CASE("chapter: ch02_batching --batch-sweep on tiny settings prints its table, writes its plot, every verdict a ✔",
          "[ch02]") {
  const std::string plot = dpt_test::temp_path("ch02_sweep.svg");
  auto run = dpt_test::run_program("ch02_batching", "--quiet --batch-sweep --data synthetic --model 16-32-4 --samples 1024 "
                                                    "--sweep-max-batch 64 --target-accuracy 0.7 --sweep-plot " + plot);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const char* line : {"steps to the target against the global batch", "critical batch E_min / S_min",
                           "✔ below the critical batch", "✔ the linear rule with warm-up reaches the target"})
    CHECK_THAT(run.output, contains_text(line));
  CHECK(run.output.find("per-sample") == std::string::npos);  // the sweep instead of the lesson
  std::ifstream in(plot);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* batch : {"8", "16", "32", "64"})  // every batch reached 70 % on this problem: one marker each
    CHECK_THAT(svg, contains_text(std::string("data-series=\"tuned per batch\" data-x=\"") + batch + "\""));
  std::remove(plot.c_str());
}

TEST_CASE("chapter: ch02_batching --batch-sweep whose target no batch reaches gives a ✘ and exit 3", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --batch-sweep --data synthetic --model 16-32-4 --samples 1024 "
                                                    "--sweep-max-batch 32 --target-accuracy 1 --sweep-max-steps 20");
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ a critical batch read off the tuned curve"));
}

TEST_CASE("chapter: ch02_batching refuses the lesson's flags beside --batch-sweep and the sweep's without it (exit 2)",
          "[ch02]") {
  const std::pair<const char*, const char*> cases[] = {
      {"--batch-sweep --lr 0.1", "--lr: not used by --batch-sweep"},
      {"--batch-sweep --batch 64", "--batch: not used by --batch-sweep"},
      {"--batch-sweep --sweep-max-batch 100", "--sweep-max-batch: expects a power of two"},
      {"--batch-sweep --sweep-max-batch 8192", "is more than --samples 4096"},
      {"--batch-sweep --optimizer adam", "--optimizer: --batch-sweep has a learning-rate grid for sgd, momentum"},
      {"--batch-sweep --eval-samples 0", "--eval-samples: --batch-sweep scores its target on the held-out set"},
      {"--batch-sweep --target-accuracy 1.5", "--target-accuracy"},
      {"--target-accuracy 0.5", "--target-accuracy: only used by --batch-sweep"},
      {"--sweep-optimizers sgd,lars", "--sweep-optimizers: only used by --batch-sweep"},
      {"--batch-sweep --sweep-optimizers sgd", "--sweep-optimizers: expects two or more names"},
      {"--batch-sweep --sweep-optimizers sgd,adam", "--sweep-optimizers: 'adam' has no learning-rate grid"},
      {"--batch-sweep --sweep-optimizers sgd,lars --optimizer lamb", "--optimizer: not used beside --sweep-optimizers"},
      {"--batch-sweep --sweep-optimizers sgd,lars --sweep-plot x.svg", "--sweep-plot: plots one optimizer's sweep"},
  };
  for (const auto& [args, says] : cases) {
    auto run = dpt_test::run_program("ch02_batching", std::string("--data synthetic ") + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, contains_text(says));
  }
}

TEST_CASE("chapter: ch02_batching --sweep-optimizers on tiny settings prints each sweep, the side-by-side table and "
          "the comparison's verdicts", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --batch-sweep --data synthetic --model 16-32-4 --samples 1024 "
                                                    "--sweep-max-batch 64 --target-accuracy 0.7 --sweep-optimizers sgd,lamb");
  INFO(run.output);
  // Whether lamb's knee moved on this toy problem is the run's to say: exit 0 with every verdict a ✔, or 3 with a ✘.
  const bool failed = run.output.find("\u2718") != std::string::npos;
  CHECK(run.exit_code == (failed ? dpt::kVerdictFailed : 0));
  for (const char* line : {"steps to the target against the global batch, sgd",
                           "steps to the target against the global batch, lamb", "sgd steps", "lamb linear",
                           "sgd: below the critical batch", "lamb: the linear rule with warm-up",
                           "lamb's tuned run reaches the target at every batch past sgd", "lamb's critical batch / sgd's",
                           "the tuned sgd run at B ="})
    CHECK_THAT(run.output, contains_text(line));
}
