// test_data.cpp — the IDX reader on files the test writes, synthetic data
// determinism, and the batch sampler's stream.
#include "support/catch.h"
#include <fstream>
#include <set>

#include "dpt/data.h"
#include "dpt/options.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
// IDX by the spec: 0, 0, type 0x08, ndims, big-endian u32 dims, then bytes.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::string out = {0, 0, 0x08, char(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += char((d >> shift) & 0xff);
  out.append(values.begin(), values.end());
  return out;
}
void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }
}  // namespace

TEST_CASE("IDX reader reads dimensions and values of a file it did not write", "[data]") {
  std::string path = dpt_test::temp_path("a.idx");
  write_file(path, idx_bytes({2, 3}, {1, 2, 3, 4, 5, 255}));
  IdxArray a = read_idx(path);
  CHECK(a.dims == std::vector<int64_t>{2, 3});
  CHECK(a.values == std::vector<uint8_t>{1, 2, 3, 4, 5, 255});
  std::remove(path.c_str());
}

TEST_CASE("IDX reader rejects truncated, gzipped and oversized files", "[data]") {
  std::string path = dpt_test::temp_path("b.idx");
  write_file(path, idx_bytes({2, 3}, {1, 2, 3}));
  CHECK_THROWS_WITH(read_idx(path), contains_text("truncated"));
  write_file(path, idx_bytes({2}, {1, 2, 3}));
  CHECK_THROWS_WITH(read_idx(path), contains_text("bytes after"));
  write_file(path, std::string("\x1f\x8b\x08\x00", 4));
  CHECK_THROWS_WITH(read_idx(path), contains_text("gunzip"));
  CHECK_THROWS_WITH(read_idx(path + ".missing"), contains_text("cannot open"));
  std::remove(path.c_str());
}

TEST_CASE("MNIST loader normalises pixels and pairs images with labels", "[data]") {
  std::string dir = dpt_test::temp_path("mnist");
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  std::vector<uint8_t> pixels(3 * 28 * 28, 0);
  pixels[0] = 255;
  write_file(dir + "/train-images-idx3-ubyte", idx_bytes({3, 28, 28}, pixels));
  write_file(dir + "/train-labels-idx1-ubyte", idx_bytes({3}, {7, 0, 9}));
  Dataset d = load_mnist(dir, 0);
  CHECK(d.size() == 3);
  CHECK(d.features() == 784);
  CHECK(d.y == std::vector<int64_t>{7, 0, 9});
  CHECK(d.x.data()[0] == Approx((1.0 - 0.1307) / 0.3081));
  CHECK(d.x.data()[1] == Approx(-0.1307 / 0.3081));
  CHECK(load_mnist(dir, 2).size() == 2);
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("synthetic data is deterministic per seed and uses every class", "[data]") {
  Dataset a = make_synthetic(2000, 20, 10, 7), b = make_synthetic(2000, 20, 10, 7), c = make_synthetic(2000, 20, 10, 8);
  CHECK(a.x.to_vector() == b.x.to_vector());
  CHECK(a.y == b.y);
  CHECK(a.y != c.y);
  std::set<int64_t> classes(a.y.begin(), a.y.end());
  CHECK(classes.size() == 10);
}

TEST_CASE("without shuffling, batches are consecutive slices that wrap at the end", "[data]") {
  BatchSampler s(10, 4, false, 0);
  CHECK(s.indices(0) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(s.indices(1) == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(s.indices(2) == std::vector<int64_t>{8, 9, 0, 1});
  CHECK(s.indices(3) == std::vector<int64_t>{2, 3, 4, 5});
}

TEST_CASE("with shuffling, every epoch visits every sample exactly once", "[data]") {
  BatchSampler s(12, 4, true, 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int64_t> seen;
    for (int step = 0; step < 3; ++step)
      for (int64_t i : s.indices(epoch * 3 + step)) seen.insert(i);
    CHECK(seen.size() == 12);
    CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 12);
  }
  CHECK(s.indices(0) != s.indices(3));  // epochs are shuffled differently
}

TEST_CASE("MNIST of another image size: the error suggests a --model that fits, never the one that failed", "[data]") {
  std::string dir = dpt_test::temp_path("mnist20");
  std::system(("mkdir -p " + dir).c_str());
  write_file(dir + "/train-images-idx3-ubyte", idx_bytes({2, 20, 20}, std::vector<uint8_t>(800, 9)));
  write_file(dir + "/train-labels-idx1-ubyte", idx_bytes({2}, {1, 2}));
  Options o;
  o.data = "mnist:" + dir;
  o.model = "784-256-10";
  CHECK_THROWS_WITH(load_dataset(o), contains_text("needs 400 inputs and 10 outputs, e.g. --model 400-256-10"));
  o.model = "400-64-32-5";
  CHECK_THROWS_WITH(load_dataset(o), contains_text("e.g. --model 400-64-32-10"));
  o.model = "400-64-32-10";
  CHECK(load_dataset(o).features() == 400);
  std::system(("rm -rf " + dir).c_str());
}
