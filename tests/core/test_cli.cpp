// test_cli.cpp — every chapter program's flags: --help, and bad values that
// must give one line naming the flag and exit code 2 (never a crash).
#include "support/catch.h"

#include <sys/stat.h>

#include <fstream>

#include "support/run_program.h"

namespace {
const std::vector<std::string> kChapters = {"ch01_sgd",           "ch02_batching",  "ch03_naive_dp",
                                            "ch04_ring_allreduce", "ch05_bucketing", "ch06_averaging",
                                            "ch07_zero"};

using dpt_test::lines_in;

// A value refused while the flags are read: exit 2, one line, naming the flag
// (and `problem`, if given), with no source location in it.
void check_refused(const std::string& chapter, const std::string& args, const std::string& flag,
                          const std::string& problem = "") {
  auto run = dpt_test::run_program(chapter, args);
  INFO(chapter << " " << args << "\n" << run.output);
  CHECK(run.exit_code == 2);
  CHECK(run.output.find(flag) != std::string::npos);
  CHECK(run.output.find(problem) != std::string::npos);
  CHECK(lines_in(run.output) == 1);
  CHECK(run.output.find(".cpp:") == std::string::npos);
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
    for (const auto& [args, flag] : cases) check_refused(chapter, args, flag);
}

TEST_CASE("distributed chapters refuse --ranks 0, a bad --comm and a bad --link", "[cli]") {
  for (const std::string chapter :
       {"ch03_naive_dp", "ch04_ring_allreduce", "ch05_bucketing", "ch06_averaging", "ch07_zero"})
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

// ----------------------------------------------------------------------------
// values that can only be mistakes, and output paths dpt would refuse

TEST_CASE("non-finite, overflowing and absurd values are refused at parse time: exit 2, one line", "[cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--lr inf", "--lr"},
      {"--lr nan", "--lr"},
      {"--lr -inf", "--lr"},
      {"--lr 1e9", "--lr"},
      {"--steps 99999999999999999999", "--steps"},  // once silently 2^63 - 1
      {"--steps 2000000000", "--steps"},
      {"--steps 1e3", "--steps"},
      {"--batch 99999999", "--batch"},
      {"--seed -1", "--seed"},
      {"--seed 99999999999999999999999", "--seed"},
      {"--samples 1000000000", "--samples"},
      {"--model 784-99999999999999999999-10", "--model"},
      {"--model 784-1000000-10", "--model"},         // 795 million parameters
      {"--data synthetic --model 784-10 --samples 50000000", "--samples"},  // 157 GB of synthetic data
  };
  for (const auto& chapter : {std::string("ch01_sgd"), std::string("ch03_naive_dp")})
    for (const auto& [args, flag] : cases) check_refused(chapter, args, flag);
}

TEST_CASE("the bounds leave every sensible value alone", "[cli]") {
  auto run = dpt_test::run_program("ch01_sgd", "--steps 0 --model 8-4-3 --samples 20 --lr 1e-4 --batch 1048576 "
                                               "--seed 18446744073709551615");
  INFO(run.output);
  CHECK(run.exit_code == 0);
}

TEST_CASE("an output path dpt would refuse stops the run before training: exit 2, one line", "[cli][output]") {
  std::string dir = dpt_test::temp_path("cli_out");
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  std::string fifo = dir + "/fifo", link = dir + "/link", target = dir + "/target";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::ofstream(target) << "precious";
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  const std::vector<std::pair<std::string, std::string>> paths = {
      {fifo, "FIFO"}, {link, "symbolic link"}, {dir, "is a directory"}, {dir + "/no/such/file", "no/such"}};
  for (const std::string flag : {"--save-weights", "--save-data", "--metrics"})
    for (const auto& [path, problem] : paths)  // 10^6 steps: checked only at the end, this would take long
      check_refused("ch01_sgd", "--model 8-4-3 --samples 20 --steps 1000000 " + flag + " " + path, flag, problem);
  struct stat st;
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  std::ifstream in(target);
  std::string content;
  in >> content;
  CHECK(content == "precious");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("saving weights to /dev/full fails with one clear line and /dev/full stays a device", "[cli][output]") {
  auto run = dpt_test::run_program("ch01_sgd", "--steps 0 --model 8-4-3 --samples 20 --save-weights /dev/full");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("'/dev/full'") != std::string::npos);
  CHECK(run.output.find("No space left on device") != std::string::npos);
  struct stat st;
  REQUIRE(::lstat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("runtime errors carry the sentence only, DPT_DEBUG=1 adds the source location", "[cli]") {
  std::string weights = dpt_test::temp_path("where.safetensors");
  REQUIRE(dpt_test::run_program("ch01_sgd", "--steps 0 --model 8-4-3 --save-weights " + weights).exit_code == 0);
  std::string args = " --model 8-5-3 --steps 5 --load-weights " + weights;
  auto plain = dpt_test::run_program("ch01_sgd", args);
  CHECK(plain.exit_code == 1);
  CHECK(plain.output.find("another --model") != std::string::npos);
  CHECK(plain.output.find(".cpp:") == std::string::npos);
  auto debug = dpt_test::run_command("DPT_DEBUG=1 " + dpt_test::program_path("ch01_sgd") + args);
  CHECK(debug.exit_code == 1);
  CHECK(debug.output.find("checkpoint.cpp:") != std::string::npos);
  std::remove(weights.c_str());
}

TEST_CASE("chapter flags out of range give one line and exit code 2 (ch05, ch06)", "[cli]") {
  check_refused("ch05_bucketing", "--bucket-mb -1", "--bucket-mb");
  check_refused("ch05_bucketing", "--accumulate 0", "--accumulate");
  check_refused("ch06_averaging", "--every 0", "--every");
  check_refused("ch06_averaging", "--average both", "--average");
}

TEST_CASE("optimizers lars and lamb are listed where the chapter's checks hold them, refused in one line elsewhere",
          "[cli]") {
  for (const std::string chapter : {"ch02_batching", "ch03_naive_dp", "ch04_ring_allreduce", "ch05_bucketing",
                                    "ch06_averaging"}) {
    auto help = dpt_test::run_program(chapter, "--help");
    INFO(chapter << "\n" << help.output);
    CHECK(help.output.find("lars | lamb") != std::string::npos);
  }
  // ch01's update check writes out four rules; ZeRO (ch07) shards Adam's state.
  for (const std::string name : {"lars", "lamb"}) {
    check_refused("ch01_sgd", "--optimizer " + name, "--optimizer", name + " not in {sgd,momentum,adam,adamw}");
    check_refused("ch07_zero", "--optimizer " + name, "--optimizer", name + " not in {adam,adamw}");
  }
}
