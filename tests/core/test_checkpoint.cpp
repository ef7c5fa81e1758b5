// test_checkpoint.cpp — safetensors round trips, rejection of damaged files,
// and load_weights refusing a mismatch without touching the model.
#include "support/catch.h"
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include "dpt/checkpoint.h"
#include "dpt/nn.h"
#include "support/run_program.h"

using namespace dpt;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
// A file written by hand, byte by byte, from the format's spec: the oracle
// for the reader that shares no code with the writer.
std::string handmade_file() {
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  out += header;
  float a[2] = {1.5f, -2.0f};
  int64_t b = 7;
  out.append(reinterpret_cast<char*>(a), 8);
  out.append(reinterpret_cast<char*>(&b), 8);
  return out;
}
}  // namespace

TEST_CASE("safetensors reader parses a file written by hand from the spec", "[checkpoint]") {
  std::string path = dpt_test::temp_path("hand.safetensors");
  write_file(path, handmade_file());
  SafeTensorsFile f = read_safetensors(path);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors["a"].floats() == std::vector<float>{1.5f, -2.0f});
  CHECK(f.tensors["b"].ints() == std::vector<int64_t>{7});
  CHECK(f.tensors["b"].shape == Shape{1});
  std::remove(path.c_str());
}

TEST_CASE("safetensors round trip keeps names, shapes, values and metadata", "[checkpoint]") {
  std::string path = dpt_test::temp_path("round.safetensors");
  Rng rng(3);
  MLP model({5, 4, 3}, Device::host(), rng);
  save_weights(path, model.named_parameters());
  std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  CHECK((8 + n) % 8 == 0);  // data section 8-byte aligned, as the spec recommends
  Rng other_rng(99);
  MLP other({5, 4, 3}, Device::host(), other_rng);
  load_weights(path, other.named_parameters());
  auto a = model.named_parameters(), b = other.named_parameters();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].tensor.to_vector() == b[i].tensor.to_vector());
  CHECK(read_safetensors(path).metadata.at("format") == "pt");
  std::remove(path.c_str());
}

TEST_CASE("a truncated safetensors file is rejected with the file's name", "[checkpoint]") {
  std::string path = dpt_test::temp_path("trunc.safetensors");
  std::string good = handmade_file();
  for (std::size_t cut : {std::size_t(3), std::size_t(20), good.size() - 1}) {
    write_file(path, good.substr(0, cut));
    CHECK_THROWS_WITH(read_safetensors(path), contains_text(path));
  }
  std::remove(path.c_str());
}

TEST_CASE("a corrupt safetensors header is rejected", "[checkpoint]") {
  std::string path = dpt_test::temp_path("corrupt.safetensors");
  std::string bad = handmade_file();
  bad[12] = '#';  // inside the JSON
  write_file(path, bad);
  CHECK_THROWS_WITH(read_safetensors(path), contains_text("not JSON"));
  std::string wrong_size = handmade_file();
  auto at = wrong_size.find("[0,8]");
  wrong_size.replace(at, 5, "[0,4]");  // same length text, offsets no longer fit shape (2,)
  write_file(path, wrong_size);
  CHECK_THROWS_WITH(read_safetensors(path), contains_text("needs 8 bytes"));
  std::string huge = handmade_file();
  huge[7] = char(0x7f);  // header length ~ 2^62
  write_file(path, huge);
  CHECK_THROWS_WITH(read_safetensors(path), contains_text("corrupt or truncated"));
  std::string extra = handmade_file() + "xx";
  write_file(path, extra);
  CHECK_THROWS_WITH(read_safetensors(path), contains_text("bytes after the last tensor"));
  std::remove(path.c_str());
}

TEST_CASE("load_weights refuses another architecture and leaves the model untouched", "[checkpoint]") {
  std::string path = dpt_test::temp_path("arch.safetensors");
  Rng rng(4);
  MLP small({5, 4, 3}, Device::host(), rng);
  save_weights(path, small.named_parameters());
  MLP wide({5, 6, 3}, Device::host(), rng);
  auto before = wide.named_parameters()[0].tensor.to_vector();
  CHECK_THROWS_WITH(load_weights(path, wide.named_parameters()),
                    contains_text("fc0.weight") && contains_text("(4, 5)") && contains_text("(6, 5)"));
  CHECK(wide.named_parameters()[0].tensor.to_vector() == before);
  MLP deep({5, 4, 4, 3}, Device::host(), rng);
  CHECK_THROWS_WITH(load_weights(path, deep.named_parameters()), contains_text("another --model"));
  std::remove(path.c_str());
}

TEST_CASE("writing is atomic: no temp file is left and a failed write keeps the old file", "[checkpoint]") {
  std::string path = dpt_test::temp_path("atomic.safetensors");
  Rng rng(5);
  MLP model({3, 2}, Device::host(), rng);
  save_weights(path, model.named_parameters());
  std::string first = read_file(path);
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  CHECK_FALSE(std::ifstream(temp).good());
  // A directory where the temp file should go makes the write fail before the rename.
  REQUIRE(::mkdir(temp.c_str(), 0700) == 0);
  CHECK_THROWS(save_weights(path, model.named_parameters()));
  CHECK(read_file(path) == first);
  ::rmdir(temp.c_str());
  std::remove(path.c_str());
}

TEST_CASE("save_dataset writes x as F32 (N, D) and y as I64 (N,)", "[checkpoint][data]") {
  std::string path = dpt_test::temp_path("data.safetensors");
  Dataset d = make_synthetic(10, 3, 4, 1);
  save_dataset(path, d);
  SafeTensorsFile f = read_safetensors(path);
  CHECK(f.tensors["x"].shape == Shape{10, 3});
  CHECK(f.tensors["x"].floats() == d.x.to_vector());
  CHECK(f.tensors["y"].shape == Shape{10});
  CHECK(f.tensors["y"].ints() == d.y);
  std::remove(path.c_str());
}
