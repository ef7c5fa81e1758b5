// test_ch02_chapter.cpp — chapter 02's program, ch02_batching: its verdicts
// and exit code when every hole is right, and how it stops when the loss
// becomes nan or explodes.
#include "support/catch.h"

#include <cstdio>
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
