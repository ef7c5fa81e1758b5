// test_checkpoint.cpp — safetensors against bytes written by hand from the
// format's spec, round trips, rejection of damaged files, and load_weights
// refusing a mismatch without touching the model. (Atomic writing and the
// output-path policy: test_output_file.cpp.)
#include "support/catch.h"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include "dpt/checkpoint.h"
#include "dpt/nn.h"
#include <nlohmann/json.hpp>
#include "support/folder.h"  // read_file, write_file
#include "support/run_program.h"

using namespace dpt;

namespace {
using dpt_test::read_file;
using dpt_test::write_file;
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

TEST_CASE("load_weights refuses a NaN or an infinity, naming the file, the tensor and the entry", "[checkpoint]") {
  std::string path = dpt_test::temp_path("nan.safetensors");
  Rng rng(4);
  MLP model({5, 4, 3}, Device::host(), rng);
  save_weights(path, model.named_parameters());
  const SafeTensorsFile good = read_safetensors(path);
  auto before = model.named_parameters()[3].tensor.to_vector();
  for (float bad : {std::nanf(""), -INFINITY}) {
    SafeTensorsFile file = good;
    std::memcpy(file.tensors.at("fc1.bias").bytes.data() + 2 * sizeof(float), &bad, sizeof bad);  // entry 2 of 3
    write_safetensors(path, file);
    INFO("value " << bad);
    CHECK_THROWS_WITH(load_weights(path, model.named_parameters()),
                      contains_text("'" + path + "': tensor 'fc1.bias' holds ") && contains_text(" at entry 2 of 3"));
    CHECK(model.named_parameters()[3].tensor.to_vector() == before);  // nothing loaded
  }
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

// ----------------------------------------------------------------------------
// The byte layout, against the spec (huggingface.co/docs/safetensors):
//   8 bytes: N, the header length, unsigned 64-bit little-endian
//   N bytes: a JSON object, starting with '{', padded at the end with spaces
//            (0x20); {"name": {"dtype", "shape", "data_offsets": [begin, end]}},
//            offsets relative to the start of the data section; an optional
//            "__metadata__" object of strings
//   then   : the data section, every byte belonging to exactly one tensor;
//            values little-endian, row-major (C order).
// The safetensors writer pads N so the data section starts at a multiple of 8
// (8 + N ≡ 0 mod 8); dpt does the same so tensors can be mapped in place.
//
// The expected values are the IEEE-754 float32 bits of 1..6, 0.5 and −0.25,
// written out as little-endian bytes by hand. A writer or reader that stores
// a (2, 3) weight column-major (1 4 2 5 3 6) fails here even when it agrees
// with itself.
namespace {
// fc0.weight (2, 3) = [[1, 2, 3], [4, 5, 6]] row-major, then fc0.bias (2,) = [0.5, -0.25].
const unsigned char kWeightBytes[24] = {0x00, 0x00, 0x80, 0x3F,  0x00, 0x00, 0x00, 0x40,  0x00, 0x00, 0x40, 0x40,
                                        0x00, 0x00, 0x80, 0x40,  0x00, 0x00, 0xA0, 0x40,  0x00, 0x00, 0xC0, 0x40};
const unsigned char kBiasBytes[8] = {0x00, 0x00, 0x00, 0x3F,  0x00, 0x00, 0x80, 0xBE};
std::string bytes_of(const unsigned char* p, std::size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

MLP model_3_2(uint64_t seed) {
  Rng rng(seed);
  return MLP({3, 2}, Device::host(), rng);
}
}  // namespace

TEST_CASE("safetensors writer: the bytes on disk follow the spec (length, JSON, padding, row-major LE data)",
          "[checkpoint]") {
  std::string path = dpt_test::temp_path("layout.safetensors");
  MLP model = model_3_2(1);
  auto params = model.named_parameters();  // fc0.weight (2, 3), fc0.bias (2,)
  REQUIRE(params[0].name == "fc0.weight");
  const float weight[6] = {1, 2, 3, 4, 5, 6};
  const float bias[2] = {0.5f, -0.25f};
  std::memcpy(params[0].tensor.data(), weight, sizeof weight);
  std::memcpy(params[1].tensor.data(), bias, sizeof bias);
  save_weights(path, params);

  std::string file = read_file(path);
  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(file[i])) << (8 * i);
  REQUIRE(8 + n + 32 == file.size());  // header, then exactly 24 + 8 data bytes: no holes, nothing extra
  CHECK((8 + n) % 8 == 0);
  std::string header = file.substr(8, n);
  CHECK(header.front() == '{');
  std::size_t close = header.find_last_of('}');
  CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // padding: spaces only
  auto json = nlohmann::json::parse(header);
  CHECK(json["fc0.weight"]["dtype"] == "F32");
  CHECK(json["fc0.weight"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(json["fc0.bias"]["shape"] == nlohmann::json::array({2}));
  CHECK(json["__metadata__"]["format"] == "pt");
  CHECK(json.size() == 3);
  uint64_t wb = json["fc0.weight"]["data_offsets"][0], we = json["fc0.weight"]["data_offsets"][1];
  uint64_t bb = json["fc0.bias"]["data_offsets"][0], be = json["fc0.bias"]["data_offsets"][1];
  CHECK(we - wb == 24);
  CHECK(be - bb == 8);
  std::string data = file.substr(8 + n);
  CHECK(data.substr(wb, 24) == bytes_of(kWeightBytes, 24));
  CHECK(data.substr(bb, 8) == bytes_of(kBiasBytes, 8));
  std::remove(path.c_str());
}

TEST_CASE("safetensors reader: a file assembled by hand loads row-major, wherever the offsets point",
          "[checkpoint]") {
  // The bias first in the data section and the weight second, with metadata,
  // the header padded with spaces to the 8-byte boundary as the spec allows.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"fc0.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]},)"
      R"("fc0.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  file += header + bytes_of(kBiasBytes, 8) + bytes_of(kWeightBytes, 24);
  std::string path = dpt_test::temp_path("handmade_layout.safetensors");
  write_file(path, file);

  MLP model = model_3_2(2);
  load_weights(path, model.named_parameters());
  Tensor w = model.named_parameters()[0].tensor;
  CHECK(w.shape() == Shape{2, 3});
  CHECK(w.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});  // row 0 = [1 2 3], row 1 = [4 5 6]
  CHECK(model.named_parameters()[1].tensor.to_vector() == std::vector<float>{0.5f, -0.25f});
  CHECK(read_safetensors(path).metadata.at("format") == "pt");
  std::remove(path.c_str());
}
