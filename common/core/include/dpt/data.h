/// @file data.h
/// @brief Data: a deterministic synthetic classification set (and a held-out
/// set from the same teacher), an IDX reader for MNIST-format image sets
/// (MNIST, Fashion-MNIST; plain or gzipped), and the batch sampler every
/// chapter draws its batches from.
///
/// A `Dataset` lives on the host: x (N, D) float32 and N int64 labels. The
/// sampler defines the *global* batch of each step; under data parallel each
/// rank takes a shard of it (chapter 03), so N ranks × batch M see exactly
/// the samples one device with batch N·M sees (chapter 03's equivalence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/tensor.h"

namespace dpt {

/// Samples on the host: x (N, D), labels y (N) in [0, classes).
struct Dataset {
  Tensor x;                ///< (N, D) inputs on the host
  std::vector<int64_t> y;  ///< N labels in [0, classes)
  int64_t classes = 0;     ///< number of classes
  /// N, the number of samples.
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  /// D, the number of input features.
  int64_t features() const { return x.defined() ? x.size(1) : 0; }
};

/// `samples` points x ~ N(0, I_features), labelled by a random *teacher*
/// network: y = argmax of its logits T2 · relu(T1 · x) (hidden width 32), each
/// class's logit standardised over the data so classes are balanced. The same `seed`
/// gives the same data on every machine. Learnable, not linearly trivial.
Dataset make_synthetic(int64_t samples, int64_t features, int64_t classes, uint64_t seed);

/// A held-out set for `train` = make_synthetic(…, seed): `samples` new inputs
/// x ~ N(0, I) drawn from another seed (seed ^ kHeldOutSeed), labelled by the
/// *same* teacher with the per-class standardisation measured on `train`, so
/// both sets share one labelling function.
Dataset make_synthetic_held_out(const Dataset& train, int64_t samples, uint64_t seed);
/// XORed into --seed for the held-out inputs (never equal to the training seed).
constexpr uint64_t kHeldOutSeed = 0x7E575E7ull;

/// An IDX array (the MNIST file format): unsigned bytes with dimensions.
struct IdxArray {
  std::vector<int64_t> dims;    ///< sizes, outermost first
  std::vector<uint8_t> values;  ///< row-major values
};
/// Reads an IDX file of unsigned bytes (magic 0x0000 08 NN), plain or gzipped
/// (recognised by gzip's magic 1f 8b; decompressed with zlib). Throws
/// dpt::Error naming the file when it is missing, a truncated or damaged
/// gzip stream, has a bad magic, is truncated, or has trailing bytes.
IdxArray read_idx(const std::string& path);

/// Where Debian's dataset-fashion-mnist package puts its four .gz files.
inline const char* const kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// An MNIST-format image set: a directory and how to normalise its pixels.
struct ImageSource {
  std::string dir;   ///< holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  std::string name;  ///< "MNIST" or "Fashion-MNIST", for messages
  float mean = 0;    ///< mean pixel of the training images, in [0, 1]
  float std = 1;     ///< their standard deviation
};
/// Parses --data: "fashion-mnist" (kFashionMnistDir), "fashion-mnist:DIR" or
/// "mnist:DIR". Throws dpt::Error on anything else (synthetic included).
ImageSource parse_image_source(const std::string& spec);

/// Reads split "train" or "t10k" (the test split) of `source`:
/// `SPLIT-images-idx3-ubyte` and `SPLIT-labels-idx1-ubyte`, each plain or
/// with .gz appended (plain wins). x (N, rows·cols) = (pixel/255 − mean)/std
/// with the source's *training* statistics for both splits; at most `limit`
/// samples, the first ones (0: all).
Dataset load_images(const ImageSource& source, const std::string& split, int64_t limit);

/// MNIST's training split from `dir`: load_images(mnist:dir, "train", limit).
Dataset load_mnist(const std::string& dir, int64_t limit);

/// Which samples form the global batch of each step.
///
/// Without shuffling, step s takes samples [s·B, (s+1)·B) mod N: consecutive
/// slices that wrap at the end of the data set. With shuffling, the sample
/// stream is the concatenation of one seeded permutation per epoch.
class BatchSampler {
 public:
  /// Batches of `global_batch` from `samples` samples; `seed` picks the permutations.
  BatchSampler(int64_t samples, int64_t global_batch, bool shuffle, uint64_t seed);
  /// Indices of the global batch of `step` (global_batch of them).
  std::vector<int64_t> indices(int64_t step);
  /// Samples per step (over all ranks).
  int64_t global_batch() const { return batch_; }

 private:
  const std::vector<int64_t>& permutation(int64_t epoch);
  int64_t samples_, batch_;
  bool shuffle_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_;
};

/// A batch on a device: x (B, D), labels (B).
struct Batch {
  Tensor x;                ///< (B, D) inputs on the batch's device
  std::vector<int64_t> y;  ///< B labels
};

/// Copies rows `indices` of `data` into a new batch on `device`.
Batch gather_batch(const Dataset& data, const std::vector<int64_t>& indices, Device& device);

}  // namespace dpt
