// test_ch01_chapter.cpp — chapter 01's program, ch01_sgd: its verdicts (the
// momentum check at the default optimizer included), its exit code, and how
// it stops when training diverges.
#include "support/catch.h"
#include <cstdio>
#include <string>

#include "dpt/verdict.h"
#include "support/run_program.h"

TEST_CASE("chapter: ch01_sgd trains, the loss falls, and every verdict is a ✔ (exit 0)", "[ch01]") {
  std::string metrics = dpt_test::temp_path("ch01.jsonl");
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --metrics " + metrics);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto lines = dpt_test::read_jsonl(metrics);
  REQUIRE(lines.size() == 301);  // one per step, then the held-out report (evaluate.h)
  CHECK(lines[300]["step"] == 300);
  CHECK(lines[300].contains("test_accuracy"));
  double first = lines[0]["loss"].get<double>();  // before any update
  double last = 0;  // mean of the last 20 steps: single-batch losses are noisy
  for (int i = 280; i < 300; ++i) last += lines[i]["loss"].get<double>() / 20;
  CHECK(first > 2.0);         // ≈ ln 10 = 2.30 for 10 classes at initialisation
  CHECK(last < 0.6 * first);  // measured ≈ 0.40·first; 0.6 leaves room for other seeds' noise
  CHECK(run.output.find("ch01 summary") != std::string::npos);
  for (const char* verdict : {"✔ backward() vs finite differences",
                              "✔ your softmax_cross_entropy_backward dlogits vs autograd",
                              "✔ your linear_backward dx vs autograd",
                              "✔ your linear_backward dweight vs autograd", "✔ your linear_backward dbias vs autograd",
                              "✔ two sgd updates vs the formula",
                              "✔ your sgd_update with momentum, two steps at lr then lr/2 vs the formula",
                              "✔ loss on the data set, after / before",
                              "✔ largest step loss / first step loss"})
    CHECK_THAT(run.output, contains_text(verdict));
  CHECK(run.output.find("✘") == std::string::npos);
  CHECK_THAT(run.output, contains_text("all 9 checks passed"));
  std::remove(metrics.c_str());
}

TEST_CASE("chapter: ch01_sgd checks two steps of momentum (yours), adam and adamw against the formula", "[ch01]") {
  for (const char* args : {"--optimizer momentum --lr 0.01", "--optimizer adam --lr 0.001", "--optimizer adamw --lr 0.001"}) {
    auto run = dpt_test::run_program("ch01_sgd", std::string("--quiet --steps 40 --model 64-32-10 --samples 512 ") + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.output, contains_text("✔ two "));
  }
}

TEST_CASE("chapter: ch01_sgd stops with a sentence and exit 1 when the loss becomes nan", "[ch01]") {
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --lr 100");  // nan within ~11 steps (100 is the largest --lr accepted)
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.output, contains_text("training diverged at step"));
  CHECK_THAT(run.output, contains_text("try a smaller --lr"));
  CHECK(run.output.find("checks passed") == std::string::npos);
}

TEST_CASE("chapter: ch01_sgd gives a ✘ and exit 3 when the loss explodes but stays finite", "[ch01]") {
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --data synthetic --lr 1");  // measured: the loss reaches ~8e11, finite
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ largest step loss / first step loss"));
  CHECK_THAT(run.output, contains_text("✘ loss on the data set, after / before"));
  CHECK_THAT(run.output, contains_text("checks FAILED"));
}
