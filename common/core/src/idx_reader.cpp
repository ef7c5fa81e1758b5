// idx_reader.cpp — IDX files (the MNIST format), plain or gzipped, and the
// MNIST-format image sets read from them (MNIST, Fashion-MNIST).
//
// An IDX file is a 4-byte magic (0, 0, type, ndims), ndims big-endian u32
// sizes, then the values row-major. Parsing that is ours; gunzipping is
// zlib's (gzread). Left out: IDX types other than unsigned bytes.
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include "dpt/check.h"
#include "dpt/data.h"

namespace dpt {

namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool starts_gzipped(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// The whole decompressed content of a gzip file. zlib reports a stream that
// ends early (a truncated download) as Z_BUF_ERROR on the read that hits the end.
std::vector<uint8_t> gunzip_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  DPT_CHECK(file != nullptr, "cannot open IDX file '" << path << "'");
  std::vector<uint8_t> bytes;
  std::vector<char> chunk(1 << 16);
  int got = 0;
  while ((got = gzread(file, chunk.data(), unsigned(chunk.size()))) > 0) bytes.insert(bytes.end(), chunk.data(), chunk.data() + got);
  int code = Z_OK;
  std::string zlib_says = gzerror(file, &code);
  gzclose(file);
  DPT_CHECK(got == 0 && (code == Z_OK || code == Z_STREAM_END),
            "'" << path << "' is a truncated or damaged gzip file (zlib: " << zlib_says
                << "); download or reinstall it (Fashion-MNIST: apt-get install --reinstall dataset-fashion-mnist)");
  return bytes;
}

std::vector<uint8_t> read_plain_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DPT_CHECK(in, "cannot open IDX file '" << path << "'");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Big-endian u32 at bytes[at].
int64_t big_endian(const std::vector<uint8_t>& bytes, std::size_t at) {
  return (int64_t(bytes[at]) << 24) | (int64_t(bytes[at + 1]) << 16) | (int64_t(bytes[at + 2]) << 8) | int64_t(bytes[at + 3]);
}

// "dir/name" when it exists, else "dir/name.gz"; an error naming both otherwise.
std::string find_idx(const std::string& dir, const std::string& name, const std::string& set) {
  std::string plain = dir + "/" + name;
  if (file_exists(plain)) return plain;
  if (file_exists(plain + ".gz")) return plain + ".gz";
  DPT_CHECK(false, set << ": found neither '" << plain << "' nor '" << plain << ".gz'"
                       << (set == "Fashion-MNIST" ? " (Debian: apt-get install dataset-fashion-mnist)" : ""));
  return "";
}

}  // namespace

// ----------------------------------------------------------------------------
// IDX: big-endian header (0, 0, type, ndims, dims…) then the values

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = starts_gzipped(path) ? gunzip_file(path) : read_plain_file(path);
  DPT_CHECK(bytes.size() >= 4, "'" << path << "' is shorter than an IDX header");
  DPT_CHECK(bytes[0] == 0 && bytes[1] == 0, "'" << path << "' is not an IDX file (bad magic)");
  DPT_CHECK(bytes[2] == 0x08, "'" << path << "': IDX type 0x" << std::hex << int(bytes[2]) << " is not unsigned bytes (0x08)");
  DPT_CHECK(bytes[3] >= 1 && bytes[3] <= 4, "'" << path << "': IDX with " << int(bytes[3]) << " dimensions");
  const std::size_t header = 4 + 4 * std::size_t(bytes[3]);
  DPT_CHECK(bytes.size() >= header, "'" << path << "' ends inside its header");
  IdxArray array;
  int64_t count = 1;
  for (std::size_t at = 4; at < header; at += 4) {
    array.dims.push_back(big_endian(bytes, at));
    count *= array.dims.back();
  }
  const int64_t present = int64_t(bytes.size() - header);
  DPT_CHECK(present >= count, "'" << path << "' is truncated: header promises " << count << " values, file has " << present);
  DPT_CHECK(present == count, "'" << path << "' has bytes after the " << count << " values its header promises");
  array.values.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return array;
}

// ----------------------------------------------------------------------------
// MNIST-format image sets

ImageSource parse_image_source(const std::string& spec) {
  auto after = [&](const std::string& prefix) { return spec.substr(prefix.size()); };
  // Pixel statistics of each set's training images, over all 60,000 × 784 pixels.
  if (spec == "fashion-mnist") return {kFashionMnistDir, "Fashion-MNIST", 0.2860f, 0.3530f};
  if (spec.rfind("fashion-mnist:", 0) == 0 && spec.size() > 14) return {after("fashion-mnist:"), "Fashion-MNIST", 0.2860f, 0.3530f};
  if (spec.rfind("mnist:", 0) == 0 && spec.size() > 6) return {after("mnist:"), "MNIST", 0.1307f, 0.3081f};
  DPT_CHECK(false, "expected synthetic, fashion-mnist, fashion-mnist:DIR or mnist:DIR, got '" << spec << "'");
  return {};
}

Dataset load_images(const ImageSource& source, const std::string& split, int64_t limit) {
  const std::string where = source.name + " in '" + source.dir + "'";
  IdxArray images = read_idx(find_idx(source.dir, split + "-images-idx3-ubyte", source.name));
  IdxArray labels = read_idx(find_idx(source.dir, split + "-labels-idx1-ubyte", source.name));
  DPT_CHECK(images.dims.size() == 3 && labels.dims.size() == 1,
            where << ": expected " << split << " images (N, rows, cols) and labels (N)");
  DPT_CHECK(images.dims[0] == labels.dims[0],
            where << ": " << images.dims[0] << " " << split << " images but " << labels.dims[0] << " labels");
  int64_t n = limit > 0 ? std::min(images.dims[0], limit) : images.dims[0];
  int64_t features = images.dims[1] * images.dims[2];
  Dataset data;
  data.classes = 10;
  data.x = Tensor::empty({n, features}, Device::host());
  for (int64_t i = 0; i < n * features; ++i) data.x.data()[i] = (images.values[i] / 255.0f - source.mean) / source.std;
  data.y.assign(labels.values.begin(), labels.values.begin() + n);
  for (int64_t label : data.y) DPT_CHECK(label < 10, where << ": " << split << " label " << label << " is not in 0..9");
  return data;
}

Dataset load_mnist(const std::string& dir, int64_t limit) {
  return load_images(parse_image_source("mnist:" + dir), "train", limit);
}

}  // namespace dpt
