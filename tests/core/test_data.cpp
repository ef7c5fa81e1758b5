// test_data.cpp — the IDX reader on files the test writes (plain and
// gzipped by zlib here), image-set loading, synthetic data determinism and
// its held-out twin, and the batch sampler's stream.
#include "support/catch.h"
#include <zlib.h>

#include <fstream>
#include <set>

#include "dpt/data.h"
#include "dpt/options.h"
#include "support/folder.h"  // read_file, write_file
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
using dpt_test::read_file;
using dpt_test::write_file;
// Compresses `bytes` into a gzip file with zlib's own writer (not dpt's reader).
void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}
std::vector<uint8_t> pseudo_random_bytes(std::size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = uint8_t((seed = seed * 1664525u + 1013904223u) >> 24);
  return out;
}
}  // namespace

TEST_CASE("IDX reader reads dimensions and values of a file it did not write", "[data]") {
  std::string path = dpt_test::temp_path("a.idx");
  write_file(path, idx_bytes({2, 3}, {1, 2, 3, 4, 5, 255}));
  IdxArray a = read_idx(path);
  CHECK(a.dims == std::vector<int64_t>{2, 3});
  CHECK(a.values == std::vector<uint8_t>{1, 2, 3, 4, 5, 255});
  std::remove(path.c_str());
}

TEST_CASE("IDX reader rejects truncated, damaged-gzip and oversized files", "[data]") {
  std::string path = dpt_test::temp_path("b.idx");
  write_file(path, idx_bytes({2, 3}, {1, 2, 3}));
  CHECK_THROWS_WITH(read_idx(path), contains_text("truncated"));
  write_file(path, idx_bytes({2}, {1, 2, 3}));
  CHECK_THROWS_WITH(read_idx(path), contains_text("bytes after"));
  write_file(path, std::string("\x1f\x8b\x08\x00", 4));  // a gzip header cut after 4 bytes
  CHECK_THROWS_WITH(read_idx(path), contains_text("'" + path + "' is a truncated or damaged gzip file"));
  CHECK_THROWS_WITH(read_idx(path + ".missing"), contains_text("cannot open"));
  std::remove(path.c_str());
}

TEST_CASE("IDX reader: a gzipped file and its plain original give the same array", "[data]") {
  std::string plain = dpt_test::temp_path("p.idx"), gz = dpt_test::temp_path("p.idx.gz");
  std::string bytes = idx_bytes({3, 28, 28}, pseudo_random_bytes(3 * 28 * 28, 5));
  write_file(plain, bytes);
  write_gzip(gz, bytes);
  REQUIRE(read_file(gz).size() != bytes.size());  // really compressed: not the same file under another name
  IdxArray a = read_idx(plain), b = read_idx(gz);
  CHECK(a.dims == std::vector<int64_t>{3, 28, 28});
  CHECK(b.dims == a.dims);
  CHECK(b.values == a.values);
  std::remove(plain.c_str());
  std::remove(gz.c_str());
}

TEST_CASE("IDX reader: a truncated .gz is one clear error naming the file", "[data]") {
  std::string gz = dpt_test::temp_path("cut.idx.gz");
  std::string bytes = idx_bytes({40, 28, 28}, pseudo_random_bytes(40 * 28 * 28, 9));  // random: barely compresses
  write_gzip(gz, bytes);
  std::string whole = read_file(gz);
  for (std::size_t keep : {whole.size() / 2, whole.size() - 4, std::size_t(12)}) {
    CAPTURE(keep);
    write_file(gz, whole.substr(0, keep));  // a download cut short (the last 4 bytes are the length)
    CHECK_THROWS_WITH(read_idx(gz), contains_text("'" + gz + "' is a truncated or damaged gzip file") &&
                                        contains_text("reinstall"));
  }
  // A complete gzip stream of a truncated IDX file: the IDX error, as for a plain file.
  write_gzip(gz, bytes.substr(0, bytes.size() - 100));
  CHECK_THROWS_WITH(read_idx(gz), contains_text("'" + gz + "' is truncated: header promises 31360 values, file has 31260"));
  std::remove(gz.c_str());
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

TEST_CASE("image sets: .gz files are found when plain ones are absent, and a missing set names both", "[data]") {
  std::string dir = dpt_test::temp_path("fmnist_gz");
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  std::vector<uint8_t> pixels(2 * 28 * 28, 0);
  pixels[0] = 255;
  write_gzip(dir + "/train-images-idx3-ubyte.gz", idx_bytes({2, 28, 28}, pixels));
  write_gzip(dir + "/train-labels-idx1-ubyte.gz", idx_bytes({2}, {3, 4}));
  Dataset d = load_images(parse_image_source("fashion-mnist:" + dir), "train", 0);
  CHECK(d.y == std::vector<int64_t>{3, 4});
  // Fashion-MNIST's own training statistics, not MNIST's.
  CHECK(d.x.data()[0] == Approx((1.0 - 0.2860) / 0.3530));
  CHECK(d.x.data()[1] == Approx(-0.2860 / 0.3530));
  CHECK_THROWS_WITH(load_images(parse_image_source("fashion-mnist:" + dir), "t10k", 0),
                    contains_text("found neither '" + dir + "/t10k-images-idx3-ubyte' nor '" + dir +
                                  "/t10k-images-idx3-ubyte.gz'") &&
                        contains_text("apt-get install dataset-fashion-mnist"));
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("data names: --data fashion-mnist is Debian's directory, anything unknown is refused", "[data]") {
  CHECK(parse_image_source("fashion-mnist").dir == "/usr/share/datasets/fashion-mnist");
  CHECK(parse_image_source("fashion-mnist:/x").dir == "/x");
  CHECK(parse_image_source("mnist:/y").name == "MNIST");
  CHECK_THROWS_WITH(parse_image_source("mnist:"), contains_text("expected synthetic, fashion-mnist"));
  CHECK_THROWS_WITH(parse_image_source("cifar"), contains_text("got 'cifar'"));
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

TEST_CASE("data flag: auto (the default) is Fashion-MNIST where installed for a 784-...-10 model, else synthetic", "[data]") {
  std::ifstream train(std::string(dpt::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
  std::ifstream test(std::string(dpt::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  const bool installed = train.good() && test.good();
  dpt::Options o;
  CHECK(o.data == "auto");
  CHECK(dpt::data_source(o) == (installed ? "fashion-mnist" : "synthetic"));  // the default model is 784-256-10
  o.model = "32-16-4";  // no image set fits: synthetic, installed or not
  CHECK(dpt::data_source(o) == "synthetic");
  o.model = "784-10";
  CHECK(dpt::data_source(o) == (installed ? "fashion-mnist" : "synthetic"));
  o.data = "synthetic";  // an explicit choice is kept
  CHECK(dpt::data_source(o) == "synthetic");
  o.data = "mnist:/somewhere";
  CHECK(dpt::data_source(o) == "mnist:/somewhere");
}
