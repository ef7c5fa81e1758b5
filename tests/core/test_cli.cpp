// test_cli.cpp — every chapter program's flags: --help, and bad values that
// must give one line naming the flag and exit code 2 (never a crash).
#include "support/catch.h"

#include "support/run_program.h"

namespace {
const std::vector<std::string> kChapters = {"ch01_sgd", "ch02_batching", "ch03_naive_dp", "ch04_ring_allreduce"};

int lines_in(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("every chapter answers --help with its common flags", "[cli]") {
  for (const auto& chapter : kChapters) {
    auto run = dpt_test::run_program(chapter, "--help");
    INFO(chapter << "\n" << run.output);
    CHECK(run.exit_code == 0);
    for (const char* flag : {"--steps", "--batch", "--lr", "--seed", "--optimizer", "--model", "--data", "--samples",
                             "--no-shuffle", "--load-weights", "--save-weights", "--save-data", "--metrics", "--quiet"})
      CHECK(run.output.find(flag) != std::string::npos);
  }
}

TEST_CASE("bad flag values give one line naming the flag and exit code 2", "[cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--batch 0", "--batch"},         {"--batch abc", "--batch"},       {"--steps -1", "--steps"},
      {"--lr 0", "--lr"},               {"--optimizer lion", "--optimizer"}, {"--model 784", "--model"},
      {"--data imagenet", "--data"},    {"--samples 0", "--samples"},     {"--load-weights /no/such/file", "--load-weights"},
      {"--no-such-flag", "--no-such-flag"}};
  for (const auto& chapter : kChapters)
    for (const auto& [args, flag] : cases) {
      auto run = dpt_test::run_program(chapter, args);
      INFO(chapter << " " << args << "\n" << run.output);
      CHECK(run.exit_code == 2);
      CHECK(run.output.find(flag) != std::string::npos);
      CHECK(lines_in(run.output) == 1);
    }
}

TEST_CASE("distributed chapters refuse --ranks 0, a bad --comm and a bad --link", "[cli]") {
  for (const std::string chapter : {"ch03_naive_dp", "ch04_ring_allreduce"})
    for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
             {"--ranks 0", "--ranks"}, {"--comm carrier-pigeon", "--comm"}, {"--link tin-can", "--link"},
             {"--comm-timeout 0", "--comm-timeout"}}) {
      auto run = dpt_test::run_program(chapter, args);
      INFO(chapter << " " << args << "\n" << run.output);
      CHECK(run.exit_code == 2);
      CHECK(run.output.find(flag) != std::string::npos);
    }
}

TEST_CASE("steps 0 writes the requested weights and data and trains nothing", "[cli]") {
  std::string weights = dpt_test::temp_path("w0.safetensors"), data = dpt_test::temp_path("d0.safetensors");
  auto run = dpt_test::run_program("ch01_sgd", "--steps 0 --model 8-4-3 --samples 20 --save-weights " + weights +
                                                   " --save-data " + data);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(std::ifstream(weights).good());
  CHECK(std::ifstream(data).good());
  std::remove(weights.c_str());
  std::remove(data.c_str());
}

TEST_CASE("a checkpoint from another model is refused without training", "[cli][checkpoint]") {
  std::string weights = dpt_test::temp_path("other.safetensors");
  REQUIRE(dpt_test::run_program("ch01_sgd", "--steps 0 --model 8-4-3 --save-weights " + weights).exit_code == 0);
  auto run = dpt_test::run_program("ch01_sgd", "--model 8-5-3 --steps 5 --load-weights " + weights);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("fc0.weight") != std::string::npos);
  CHECK(run.output.find("another --model") != std::string::npos);
  std::remove(weights.c_str());
}
