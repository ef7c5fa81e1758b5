// checkpoint.cpp — safetensors reading, validating and atomic writing.
#include "dpt/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dpt/check.h"
#include "dpt/output_file.h"

namespace dpt {

namespace {
using json = nlohmann::json;

const char* dtype_name(DType d) { return d == DType::F32 ? "F32" : "I64"; }
std::size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 8; }

}  // namespace

std::vector<float> SafeTensor::floats() const {
  DPT_CHECK(dtype == DType::F32, "expected an F32 tensor, found " << dtype_name(dtype));
  std::vector<float> out(bytes.size() / 4);
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());  // an empty vector's data() may be null
  return out;
}

std::vector<int64_t> SafeTensor::ints() const {
  DPT_CHECK(dtype == DType::I64, "expected an I64 tensor, found " << dtype_name(dtype));
  std::vector<int64_t> out(bytes.size() / 8);
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

SafeTensor to_safetensor(const Tensor& t) {
  SafeTensor st{DType::F32, t.shape(), std::vector<uint8_t>(t.nbytes())};
  copy_bytes(st.bytes.data(), Device::host(), t.data(), t.device(), t.nbytes());
  return st;
}

SafeTensor to_safetensor(const std::vector<int64_t>& values, const Shape& shape) {
  DPT_CHECK(shape_numel(shape) == int64_t(values.size()), "to_safetensor: shape and values disagree");
  SafeTensor st{DType::I64, shape, std::vector<uint8_t>(values.size() * 8)};
  if (!values.empty()) std::memcpy(st.bytes.data(), values.data(), st.bytes.size());  // a (0,) tensor: no bytes
  return st;
}

// ----------------------------------------------------------------------------
// writing: header JSON padded with spaces to a multiple of 8, then the data

void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {  // std::map: sorted names, sorted offsets
    DPT_CHECK(name != "__metadata__", "a tensor cannot be named __metadata__");
    header[name] = {{"dtype", dtype_name(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));

  OutputFile out(path);  // atomic: temp file, fsync, rename (see output_file.h)
  out.write(prefix, 8);
  out.write(text);
  for (const auto& entry : file.tensors) out.write(entry.second.bytes.data(), entry.second.bytes.size());
  out.commit();
}

// ----------------------------------------------------------------------------
// reading: trust nothing in the file

SafeTensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  DPT_CHECK(in, "cannot open safetensors file '" << path << "'");
  uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  DPT_CHECK(file_size >= 8, "'" << path << "' is not safetensors: " << file_size << " bytes, shorter than the 8-byte header length");
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(prefix[i]) << (8 * i);
  DPT_CHECK(header_size <= file_size - 8 && header_size <= (uint64_t(100) << 20),
            "'" << path << "' is corrupt or truncated: header length " << header_size << " with "
                << file_size - 8 << " bytes after it");
  std::string text(header_size, '\0');
  in.read(text.data(), std::streamsize(header_size));
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    DPT_FAIL("'" << path << "' has a corrupt header (not JSON): " << e.what());
  }
  DPT_CHECK(header.is_object(), "'" << path << "': header is not a JSON object");

  SafeTensorsFile file;
  uint64_t data_size = file_size - 8 - header_size;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      DPT_CHECK(entry.is_object(), "'" << path << "': __metadata__ is not an object");
      for (auto& [key, value] : entry.items()) {
        DPT_CHECK(value.is_string(), "'" << path << "': metadata '" << key << "' is not a string");
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const char* where = name.c_str();
    DPT_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
                  entry.contains("data_offsets"),
              "'" << path << "': tensor '" << where << "' lacks dtype, shape or data_offsets");
    SafeTensor t;
    std::string dtype = entry["dtype"].is_string() ? entry["dtype"].get<std::string>() : "?";
    if (dtype == "F32") t.dtype = DType::F32;
    else if (dtype == "I64") t.dtype = DType::I64;
    else DPT_FAIL("'" << path << "': tensor '" << where << "' has dtype " << dtype << "; dpt reads F32 and I64");
    DPT_CHECK(entry["shape"].is_array(), "'" << path << "': tensor '" << where << "' shape is not a list");
    for (auto& dim : entry["shape"]) {
      DPT_CHECK(dim.is_number_unsigned(), "'" << path << "': tensor '" << where << "' has a bad dimension " << dim.dump());
      t.shape.push_back(dim.get<int64_t>());
    }
    auto& offsets = entry["data_offsets"];
    DPT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned(),
              "'" << path << "': tensor '" << where << "' data_offsets is not [begin, end]");
    uint64_t begin = offsets[0], end = offsets[1];
    DPT_CHECK(begin <= end && end <= data_size,
              "'" << path << "' is truncated or corrupt: tensor '" << where << "' spans bytes [" << begin
                  << ", " << end << ") of a " << data_size << "-byte data section");
    DPT_CHECK(end - begin == uint64_t(shape_numel(t.shape)) * dtype_size(t.dtype),
              "'" << path << "': tensor '" << where << "' shape " << shape_str(t.shape) << " needs "
                  << shape_numel(t.shape) * dtype_size(t.dtype) << " bytes, offsets give " << end - begin);
    ranges.push_back({begin, end});
    t.bytes.resize(end - begin);
    in.seekg(std::streamoff(8 + header_size + begin));
    in.read(reinterpret_cast<char*>(t.bytes.data()), std::streamsize(end - begin));
    DPT_CHECK(in, "'" << path << "': reading tensor '" << where << "' failed");
    file.tensors[name] = std::move(t);
  }
  // The data section must be covered exactly: no overlaps, no holes, nothing extra.
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (auto& r : ranges) {
    DPT_CHECK(r.first == covered, "'" << path << "' is corrupt: tensor data overlaps or leaves a gap at byte " << covered);
    covered = r.second;
  }
  DPT_CHECK(covered == data_size, "'" << path << "' is corrupt: " << data_size - covered
                                      << " bytes after the last tensor");
  return file;
}

// ----------------------------------------------------------------------------
// weights and data sets

void save_weights(const std::string& path, const std::vector<NamedTensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  SafeTensorsFile file;
  file.metadata = metadata;
  for (const auto& named : tensors) file.tensors[named.name] = to_safetensor(named.tensor);
  file.metadata["format"] = "pt";
  file.metadata["producer"] = "dpt";
  write_safetensors(path, file);
}

void load_weights(const std::string& path, const std::vector<NamedTensor>& tensors) {
  SafeTensorsFile file = read_safetensors(path);
  // Validate everything before touching any tensor: a mismatch loses nothing.
  for (const auto& named : tensors) {
    auto it = file.tensors.find(named.name);
    DPT_CHECK(it != file.tensors.end(),
              "'" << path << "' has no tensor '" << named.name << "' (is it from another --model?)");
    DPT_CHECK(it->second.dtype == DType::F32, "'" << path << "': '" << named.name << "' is not F32");
    DPT_CHECK(it->second.shape == named.tensor.shape(),
              "'" << path << "': '" << named.name << "' is " << shape_str(it->second.shape)
                  << " but the model expects " << shape_str(named.tensor.shape())
                  << " (is it from another --model?)");
  }
  DPT_CHECK(file.tensors.size() == tensors.size(),
            "'" << path << "' holds " << file.tensors.size() << " tensors, the model has " << tensors.size());
  for (const auto& named : tensors) {  // a NaN or inf would only surface steps later, in a check naming no file
    std::vector<float> values = file.tensors[named.name].floats();
    auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
    DPT_CHECK(bad == values.end(),
              "'" << path << "': tensor '" << named.name << "' holds " << *bad << " at entry " << (bad - values.begin())
                  << " of " << values.size() << "; weights must be finite numbers to train from");
  }
  for (const auto& named : tensors) {
    Tensor target = named.tensor;
    copy_bytes(target.data(), target.device(), file.tensors[named.name].bytes.data(), Device::host(),
               target.nbytes());
  }
}

void save_dataset(const std::string& path, const Dataset& data) {
  SafeTensorsFile file;
  file.tensors["x"] = to_safetensor(data.x);
  file.tensors["y"] = to_safetensor(data.y, {data.size()});
  file.metadata["classes"] = std::to_string(data.classes);
  write_safetensors(path, file);
}

}  // namespace dpt
