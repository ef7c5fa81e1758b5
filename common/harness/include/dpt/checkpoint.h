/// @file checkpoint.h
/// @brief safetensors files: read, write (atomically), and model weights by
/// name in PyTorch's layout, so `torch` and `safetensors` read what dpt writes.
///
/// The format (https://huggingface.co/docs/safetensors): 8 bytes little-endian
/// header length N, N bytes of JSON `{"name": {"dtype": "F32", "shape": […],
/// "data_offsets": [begin, end]}, …, "__metadata__": {…}}`, then the raw data.
/// Reading validates everything a corrupt or truncated file could get wrong
/// and names the file and the problem; writing goes to a temporary file that
/// is renamed over the target only when complete, so a crash never leaves a
/// half-written checkpoint behind.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/tensor.h"

namespace dpt {

/// Element types dpt reads and writes.
enum class DType { F32, I64 };

/// One tensor of a safetensors file, bytes on the host.
struct SafeTensor {
  DType dtype = DType::F32;   ///< element type
  Shape shape;                ///< sizes, outermost first
  std::vector<uint8_t> bytes; ///< the raw little-endian values
  /// The values as float32 (dtype must be F32).
  std::vector<float> floats() const;
  /// The values as int64 (dtype must be I64).
  std::vector<int64_t> ints() const;
};

/// A whole safetensors file.
struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;    ///< by name
  std::map<std::string, std::string> metadata;  ///< the "__metadata__" strings
};

/// Writes `file` to `path` atomically (temp file + fsync + rename).
void write_safetensors(const std::string& path, const SafeTensorsFile& file);
/// Reads and validates `path`. Throws dpt::Error naming the file and what is wrong.
SafeTensorsFile read_safetensors(const std::string& path);

/// A float32 tensor's values as a SafeTensor.
SafeTensor to_safetensor(const Tensor& t);
/// int64 values with a shape as a SafeTensor.
SafeTensor to_safetensor(const std::vector<int64_t>& values, const Shape& shape);

/// Saves named tensors (e.g. MLP::named_parameters()) as F32 entries, with
/// `metadata` beside "format" and "producer" (a language model's vocabulary:
/// text_corpus.h's vocabulary_metadata).
void save_weights(const std::string& path, const std::vector<NamedTensor>& tensors,
                  const std::map<std::string, std::string>& metadata = {});
/// Loads into existing tensors by name. The file must hold exactly these names
/// with these shapes (F32), every value finite (a NaN or inf is refused, naming
/// the file, the tensor and the entry); otherwise throws without touching any tensor.
void load_weights(const std::string& path, const std::vector<NamedTensor>& tensors);
/// Saves a data set as `x` (N, D) F32 and `y` (N,) I64.
void save_dataset(const std::string& path, const Dataset& data);

}  // namespace dpt
