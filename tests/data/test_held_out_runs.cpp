// test_held_out_runs.cpp — every chapter program scores its held-out set and
// never trains on it. Each chapter runs three times on one small image set
// the test writes (8×8 images, 10 classes): with a clean test split, with a
// poisoned one (inverted pixels, every label moved to the next class) and
// with --eval-samples 0. The saved weights must be the same bytes in all
// three runs, while the held-out accuracies must differ (so the test split
// really was read and scored, by the run that wrote the weights).
#include "support/catch.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_program.h"

namespace {

// IDX by the spec: 0, 0, type 0x08, ndims, big-endian u32 dims, then bytes.
std::string idx(const std::vector<uint32_t>& dims, const std::string& values) {
  std::string out = {0, 0, 0x08, char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += char((d >> shift) & 0xff);
  return out + values;
}

// n images of 8×8 whose class c lights pixels j ≡ c (mod 10), over noise: learnable in a few steps.
void write_split(const std::string& dir, const std::string& split, uint32_t n, uint32_t seed, bool poisoned) {
  std::string pixels, labels;
  for (uint32_t i = 0; i < n; ++i) {
    int c = int(i % 10);
    for (int j = 0; j < 64; ++j) {
      seed = seed * 1664525u + 1013904223u;
      int v = (j % 10 == c ? 180 : 0) + int(seed >> 26);  // + noise in [0, 64)
      pixels += char(poisoned ? 255 - v : v);
    }
    labels += char(poisoned ? (c + 1) % 10 : c);
  }
  std::ofstream(dir + "/" + split + "-images-idx3-ubyte", std::ios::binary) << idx({n, 8, 8}, pixels);
  std::ofstream(dir + "/" + split + "-labels-idx1-ubyte", std::ios::binary) << idx({n}, labels);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The metrics file's last line (the held-out report).
nlohmann::json last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.empty() ? nlohmann::json() : nlohmann::json::parse(last);
}

struct Chapter {
  std::string name, args;
};

}  // namespace

TEST_CASE("every chapter trains the same weights with a clean, a poisoned or no test split", "[data]") {
  const std::string root = dpt_test::temp_path("held_out_runs");
  REQUIRE(std::system(("rm -rf " + root + " && mkdir -p " + root + "/clean " + root + "/poisoned").c_str()) == 0);
  for (const char* set : {"clean", "poisoned"}) {
    write_split(root + "/" + set, "train", 400, 1, false);  // the same training files, byte for byte
    write_split(root + "/" + set, "t10k", 100, 2, std::string(set) == "poisoned");
  }
  const std::string common = "--model 64-32-10 --samples 400 --steps 40 --batch 8 --lr 0.05 --seed 3 --quiet";
  const std::vector<Chapter> chapters = {
      {"ch01_sgd", ""},
      {"ch02_batching", ""},
      {"ch03_naive_dp", "--ranks 2"},
      {"ch04_ring_allreduce", "--ranks 2 --max-bytes 4096 --check-size 1000"},
      {"ch05_bucketing", "--ranks 2"},
      {"ch06_averaging", "--ranks 2 --average params --every 4"},
      {"ch07_zero", "--ranks 2 --stage 3"},
  };
  for (const Chapter& c : chapters) {
    CAPTURE(c.name);
    auto run = [&](const std::string& set, const std::string& tag, const std::string& extra) {
      std::string weights = root + "/" + c.name + "_" + tag + ".safetensors";
      std::string metrics = root + "/" + c.name + "_" + tag + ".jsonl";
      auto result = dpt_test::run_program(c.name, common + " " + c.args + " " + extra + " --data mnist:" + root + "/" +
                                                      set + " --save-weights " + weights + " --metrics " + metrics);
      INFO(dpt_test::summary_line(result.output));
      REQUIRE(result.exit_code == 0);
      return std::make_pair(read_file(weights), last_line(metrics));
    };
    auto clean = run("clean", "clean", "");
    auto poisoned = run("poisoned", "poisoned", "");
    auto off = run("clean", "off", "--eval-samples 0");
    REQUIRE(clean.first.size() > 64 * 32 * 4);
    CHECK((poisoned.first == clean.first));  // the test split's contents reach no weight
    CHECK((off.first == clean.first));       // scoring it at all changes nothing
    // ...and it was scored: the clean split is learnt, the poisoned one is wrong on every class.
    REQUIRE(clean.second.contains("test_accuracy"));
    REQUIRE(poisoned.second.contains("test_accuracy"));
    CHECK(clean.second["test_samples"] == 100);
    CHECK(clean.second["test_accuracy"].get<double>() >= 0.5);
    CHECK(poisoned.second["test_accuracy"].get<double>() <= 0.2);
    CHECK_FALSE(off.second.contains("test_accuracy"));
    CHECK(off.second["train_accuracy"] == clean.second["train_accuracy"]);
  }
  REQUIRE(std::system(("rm -rf " + root).c_str()) == 0);
}
