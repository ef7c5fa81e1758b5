// data.cpp — synthetic data, the IDX reader, batch sampling.
#include "dpt/data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/autograd.h"

namespace dpt {

// ----------------------------------------------------------------------------
// synthetic: Gaussian inputs, labels from a random teacher MLP

Dataset make_synthetic(int64_t samples, int64_t features, int64_t classes, uint64_t seed) {
  DPT_CHECK(samples > 0 && features > 0 && classes >= 2,
            "synthetic data needs samples > 0, features > 0 and classes >= 2; got " << samples
                << ", " << features << ", " << classes);
  NoGradGuard no_grad;
  Rng rng(seed);
  Device& host = Device::host();
  Dataset data;
  data.classes = classes;
  data.x = Tensor::empty({samples, features}, host);
  for (int64_t i = 0; i < data.x.numel(); ++i) data.x.data()[i] = rng.normal();
  Rng teacher_rng(seed ^ 0x7EAC4E55ull);
  MLP teacher({features, 32, classes}, host, teacher_rng);
  Tensor logits = teacher.forward(data.x);
  // Standardise each class's logit over the data set: a random teacher would
  // otherwise hand most samples to a few classes.
  for (int64_t c = 0; c < classes; ++c) {
    double mean = 0, square = 0;
    for (int64_t i = 0; i < samples; ++i) mean += logits.data()[i * classes + c] / double(samples);
    for (int64_t i = 0; i < samples; ++i) square += std::pow(logits.data()[i * classes + c] - mean, 2) / double(samples);
    double inv_std = 1.0 / std::sqrt(square + 1e-12);
    for (int64_t i = 0; i < samples; ++i)
      logits.data()[i * classes + c] = float((logits.data()[i * classes + c] - mean) * inv_std);
  }
  data.y.resize(samples);
  for (int64_t i = 0; i < samples; ++i) {
    const float* row = logits.data() + i * classes;
    data.y[i] = std::max_element(row, row + classes) - row;
  }
  return data;
}

// ----------------------------------------------------------------------------
// IDX: big-endian header (0, 0, type, ndims, dims…) then the values

IdxArray read_idx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DPT_CHECK(in, "cannot open IDX file '" << path << "'");
  unsigned char magic[4] = {};
  in.read(reinterpret_cast<char*>(magic), 4);
  DPT_CHECK(in.gcount() == 4, "'" << path << "' is shorter than an IDX header");
  DPT_CHECK(magic[0] == 0 && magic[1] == 0,
            "'" << path << "' is not an IDX file (bad magic; is it still gzipped? run gunzip)");
  DPT_CHECK(magic[2] == 0x08, "'" << path << "': IDX type 0x" << std::hex << int(magic[2])
                                  << " is not unsigned bytes (0x08)");
  DPT_CHECK(magic[3] >= 1 && magic[3] <= 4, "'" << path << "': IDX with " << int(magic[3]) << " dimensions");
  IdxArray array;
  int64_t count = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    DPT_CHECK(in.gcount() == 4, "'" << path << "' ends inside its header");
    int64_t dim = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]);
    array.dims.push_back(dim);
    count *= dim;
  }
  DPT_CHECK(count <= (int64_t(1) << 34), "'" << path << "': IDX dimensions claim " << count << " values");
  array.values.resize(count);
  in.read(reinterpret_cast<char*>(array.values.data()), count);
  DPT_CHECK(in.gcount() == count,
            "'" << path << "' is truncated: header promises " << count << " values, file has " << in.gcount());
  DPT_CHECK(in.peek() == std::ifstream::traits_type::eof(),
            "'" << path << "' has bytes after the " << count << " values its header promises");
  return array;
}

Dataset load_mnist(const std::string& dir, int64_t limit) {
  IdxArray images = read_idx(dir + "/train-images-idx3-ubyte");
  IdxArray labels = read_idx(dir + "/train-labels-idx1-ubyte");
  DPT_CHECK(images.dims.size() == 3 && labels.dims.size() == 1,
            "MNIST in '" << dir << "': expected images (N, rows, cols) and labels (N)");
  DPT_CHECK(images.dims[0] == labels.dims[0],
            "MNIST in '" << dir << "': " << images.dims[0] << " images but " << labels.dims[0] << " labels");
  int64_t n = images.dims[0];
  if (limit > 0) n = std::min(n, limit);
  int64_t features = images.dims[1] * images.dims[2];
  Dataset data;
  data.classes = 10;
  data.x = Tensor::empty({n, features}, Device::host());
  for (int64_t i = 0; i < n * features; ++i)
    data.x.data()[i] = (images.values[i] / 255.0f - 0.1307f) / 0.3081f;
  data.y.assign(labels.values.begin(), labels.values.begin() + n);
  for (int64_t label : data.y)
    DPT_CHECK(label < 10, "MNIST in '" << dir << "': label " << label << " is not a digit");
  return data;
}

// ----------------------------------------------------------------------------
// batches

BatchSampler::BatchSampler(int64_t samples, int64_t global_batch, bool shuffle, uint64_t seed)
    : samples_(samples), batch_(global_batch), shuffle_(shuffle), seed_(seed) {
  DPT_CHECK(samples > 0, "the data set is empty");
  DPT_CHECK(global_batch > 0, "batch size must be > 0, got " << global_batch);
}

const std::vector<int64_t>& BatchSampler::permutation(int64_t epoch) {
  if (epoch != cached_epoch_) {
    cached_.resize(samples_);
    std::iota(cached_.begin(), cached_.end(), int64_t(0));
    Rng rng(seed_ * 1000003ull + uint64_t(epoch));
    for (int64_t i = samples_ - 1; i > 0; --i)  // Fisher–Yates
      std::swap(cached_[i], cached_[rng.below(uint64_t(i) + 1)]);
    cached_epoch_ = epoch;
  }
  return cached_;
}

std::vector<int64_t> BatchSampler::indices(int64_t step) {
  std::vector<int64_t> out(batch_);
  for (int64_t j = 0; j < batch_; ++j) {
    int64_t position = step * batch_ + j;  // position in the endless sample stream
    int64_t within = position % samples_;
    out[j] = shuffle_ ? permutation(position / samples_)[within] : within;
  }
  return out;
}

Batch gather_batch(const Dataset& data, const std::vector<int64_t>& indices, Device& device) {
  int64_t features = data.features();
  Batch batch;
  batch.x = Tensor::empty({int64_t(indices.size()), features}, device);
  batch.y.resize(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    DPT_CHECK(indices[i] >= 0 && indices[i] < data.size(),
              "sample index " << indices[i] << " outside a data set of " << data.size());
    copy_bytes(batch.x.data() + i * features, device, data.x.data() + indices[i] * features,
               data.x.device(), features * sizeof(float));
    batch.y[i] = data.y[indices[i]];
  }
  return batch;
}

}  // namespace dpt
