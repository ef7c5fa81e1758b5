// test_ch14_chapter.cpp — chapter 14's program, ch14_language_model, on a
// small GPT (2 layers of width 32, context 16) over 2 rank threads: every
// verdict ✔ (the holes' probes, the step check, causality on the trained
// model), a sample written, a bad flag stopped with exit 2.
#include "support/catch.h"

#include <string>

#include "support/run_program.h"

namespace {
const std::string kSmall =
    "--ranks 2 --data synthetic --layers 2 --heads 2 --width 32 --context 16 --batch 4 --steps 30 --eval-every 15 ";
}

TEST_CASE("chapter: ch14 trains a small GPT on 2 ranks, every verdict passes, and it writes a sample", "[ch14]") {
  auto run = dpt_test::run_program("ch14_language_model", kSmall + "--sample 40");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("causal_attention = an oracle") != std::string::npos);
  CHECK(run.output.find("a query at position i is scored against the keys") != std::string::npos);
  CHECK(run.output.find("layer_norm_backward: dx = finite differences") != std::string::npos);
  CHECK(run.output.find("generate's draws follow the model's tempered distribution") != std::string::npos);
  CHECK(run.output.find("ignore every token from 8 on") != std::string::npos);
  CHECK(run.output.find("5. A sample: 40 characters") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch14 refuses a bad flag with one line and exit 2", "[ch14]") {
  auto run = dpt_test::run_program("ch14_language_model", "--layers 0");
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("--layers") != std::string::npos);
}
