// data.cpp — synthetic data (training and held-out), batch sampling. The IDX
// reader is idx_reader.cpp.
#include "dpt/data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/autograd.h"

namespace dpt {

// ----------------------------------------------------------------------------
// synthetic: Gaussian inputs, labels from a random teacher MLP

namespace {
// x (samples, features) ~ N(0, I), from `seed`.
Tensor normal_inputs(int64_t samples, int64_t features, uint64_t seed) {
  Rng rng(seed);
  Tensor x = Tensor::empty({samples, features}, Device::host());
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = rng.normal();
  return x;
}

// Per-class mean and 1/std of the teacher's logits over a data set.
struct Standardisation {
  std::vector<double> mean, inv_std;
};

// The teacher's labels of x: the argmax of its logits, each class's logit
// standardised with `s` — computed here from x itself when `s` is empty
// (a training set), reused as given otherwise (a held-out set).
std::vector<int64_t> teacher_labels(const Tensor& x, int64_t classes, uint64_t seed, Standardisation& s) {
  NoGradGuard no_grad;
  const int64_t samples = x.size(0);
  Rng teacher_rng(seed ^ 0x7EAC4E55ull);
  MLP teacher({x.size(1), 32, classes}, Device::host(), teacher_rng);
  Tensor logits = teacher.forward(x);
  float* l = logits.data();
  // Standardise each class's logit over the data set: a random teacher would
  // otherwise hand most samples to a few classes.
  const bool measure = s.mean.empty();
  for (int64_t c = 0; c < classes && measure; ++c) {
    double mean = 0, square = 0;
    for (int64_t i = 0; i < samples; ++i) mean += l[i * classes + c] / double(samples);
    for (int64_t i = 0; i < samples; ++i) square += std::pow(l[i * classes + c] - mean, 2) / double(samples);
    s.mean.push_back(mean);
    s.inv_std.push_back(1.0 / std::sqrt(square + 1e-12));
  }
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < samples; ++i) l[i * classes + c] = float((l[i * classes + c] - s.mean[c]) * s.inv_std[c]);
  std::vector<int64_t> y(samples);
  for (int64_t i = 0; i < samples; ++i) y[i] = std::max_element(l + i * classes, l + (i + 1) * classes) - (l + i * classes);
  return y;
}

void check_synthetic(int64_t samples, int64_t features, int64_t classes) {
  DPT_CHECK(samples > 0 && features > 0 && classes >= 2,
            "synthetic data needs samples > 0, features > 0 and classes >= 2; got " << samples << ", " << features
                                                                                    << ", " << classes);
}
}  // namespace

Dataset make_synthetic(int64_t samples, int64_t features, int64_t classes, uint64_t seed) {
  check_synthetic(samples, features, classes);
  Standardisation measured;
  Dataset data;
  data.classes = classes;
  data.x = normal_inputs(samples, features, seed);
  data.y = teacher_labels(data.x, classes, seed, measured);
  return data;
}

Dataset make_synthetic_held_out(const Dataset& train, int64_t samples, uint64_t seed) {
  check_synthetic(samples, train.features(), train.classes);
  Standardisation training;  // the training set's, so both sets have one labelling function
  teacher_labels(train.x, train.classes, seed, training);
  Dataset data;
  data.classes = train.classes;
  data.x = normal_inputs(samples, train.features(), seed ^ kHeldOutSeed);
  data.y = teacher_labels(data.x, train.classes, seed, training);
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

// Rows are gathered in host memory (the data set lives there); a batch for a
// GPU is gathered into a host staging tensor and sent in one copy, not one
// small copy per row.
Batch gather_batch(const Dataset& data, const std::vector<int64_t>& indices, Device& device) {
  DPT_CHECK(data.x.device().is_host_memory(), "gather_batch: the data set must be in host memory, it is on "
                                                  << data.x.device().name());
  int64_t features = data.features();
  Device& staging = device.is_host_memory() ? device : Device::host();
  Batch batch;
  batch.x = Tensor::empty({int64_t(indices.size()), features}, staging);
  batch.y.resize(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    DPT_CHECK(indices[i] >= 0 && indices[i] < data.size(),
              "sample index " << indices[i] << " outside a data set of " << data.size());
    copy_bytes(batch.x.data() + i * features, staging, data.x.data() + indices[i] * features,
               data.x.device(), features * sizeof(float));
    batch.y[i] = data.y[indices[i]];
  }
  if (&staging != &device) batch.x = batch.x.to(device);
  return batch;
}

}  // namespace dpt
