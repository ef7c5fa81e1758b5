// tp_model.cpp — the pairs: slices from the full model, the forward, the gathers.
#include "tp_model.h"

#include "ch12.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch12 {

std::string tp_model_problem(const std::vector<int64_t>& widths, int tp) {
  const std::size_t layers = widths.size() - 1;
  if (layers % 2 != 0)
    return "--model has " + std::to_string(layers) + " layers; tensor parallelism here splits pairs of layers "
           "(column- then row-parallel): give an even number, e.g. 784-256-64-256-10";
  for (std::size_t p = 0; p < layers / 2; ++p)
    if (widths[2 * p + 1] % tp != 0)
      return "--tp " + std::to_string(tp) + " does not divide the hidden width " + std::to_string(widths[2 * p + 1]) +
             " of layer pair " + std::to_string(p) + ": each rank owns an equal block of it";
  return "";
}

int64_t parameters_per_rank(const std::vector<int64_t>& w, int tp) {
  int64_t total = 0;
  for (std::size_t p = 0; p + 2 < w.size(); p += 2)
    total += (w[p] * w[p + 1] + w[p + 1] + w[p + 1] * w[p + 2]) / tp + w[p + 2];
  return total;
}

int64_t all_reduced_per_sample(const std::vector<int64_t>& w) {
  int64_t total = 0;
  for (std::size_t p = 0; p + 2 < w.size(); p += 2) total += w[p + 2] + (p > 0 ? w[p] : 0);
  return total;
}

TensorParallelMLP::TensorParallelMLP(Communicator& group, const MLP& full, Device& device)
    : group_(group), widths_(full.widths()) {
  const std::string problem = tp_model_problem(widths_, group.size());
  DPT_CHECK(problem.empty(), problem);
  const int t = group.rank(), T = group.size();
  const std::vector<Linear>& layers = full.layers();
  for (std::size_t l = 0; l < layers.size(); l += 2) {
    Pair pair;
    pair.column_weight = shard_weight(layers[l].weight, Split::Output, t, T, device);
    pair.column_bias = shard_weight(layers[l].bias, Split::Output, t, T, device);
    pair.row_weight = shard_weight(layers[l + 1].weight, Split::Input, t, T, device);
    pair.row_bias = layers[l + 1].bias.to(device);
    for (Tensor* p : {&pair.column_weight, &pair.column_bias, &pair.row_weight, &pair.row_bias}) p->set_requires_grad(true);
    pairs_.push_back(pair);
  }
}

Tensor TensorParallelMLP::forward(const Tensor& x) {
  Tensor a = x;
  hidden_elements_ = 0;
  for (std::size_t p = 0; p < pairs_.size(); ++p) {
    const Pair& pair = pairs_[p];
    Tensor h = relu(column_parallel_linear(group_, a, pair.column_weight, pair.column_bias));  // (B, h/T): split
    hidden_elements_ += 2 * h.numel();
    a = row_parallel_linear(group_, h, pair.row_weight, pair.row_bias);  // (B, out): whole on every rank
    if (p + 1 < pairs_.size()) a = relu(a);
  }
  return a;
}

std::vector<Tensor> TensorParallelMLP::parameters() const {
  std::vector<Tensor> params;
  for (const Pair& pair : pairs_)
    for (const Tensor& p : {pair.column_weight, pair.column_bias, pair.row_weight, pair.row_bias}) params.push_back(p);
  return params;
}

int64_t TensorParallelMLP::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

std::vector<ModelPiece> TensorParallelMLP::pieces() const {
  const int64_t t = group_.rank();
  std::vector<ModelPiece> pieces;
  for (std::size_t k = 0; k < pairs_.size(); ++k) {
    const Pair& pair = pairs_[k];
    const int64_t first = 4 * int64_t(k), block = t * pair.column_weight.shape()[0];  // rank t's hidden features
    pieces.push_back({first, block, 0, pair.column_weight});
    pieces.push_back({first + 1, block, 0, pair.column_bias});
    pieces.push_back({first + 2, 0, block, pair.row_weight});
    if (t == 0) pieces.push_back({first + 3, 0, 0, pair.row_bias});  // whole on every rank: listed once
  }
  return pieces;
}

std::vector<float> TensorParallelMLP::gather(bool grads) {
  std::vector<float> flat;
  auto append = [&flat](const Tensor& host) {
    const float* d = host.data();
    flat.insert(flat.end(), d, d + host.numel());
  };
  for (std::size_t k = 0; k < pairs_.size(); ++k) {
    const Pair& pair = pairs_[k];
    auto of = [grads, k](const Tensor& p, const char* name) {
      DPT_CHECK(!grads || p.grad().defined(), "pair " << k << "'s " << name << " has no gradient after backward: the "
                                                     "loss depends on it on every rank, so backward must reach it");
      return grads ? p.grad() : p;
    };
    append(gather_weight(group_, of(pair.column_weight, "column-parallel weight"), Split::Output));
    append(gather_weight(group_, of(pair.column_bias, "column-parallel bias"), Split::Output));
    append(gather_weight(group_, of(pair.row_weight, "row-parallel weight"), Split::Input));
    append(of(pair.row_bias, "row-parallel bias").to(Device::host()));  // whole on every rank
  }
  return flat;
}

}  // namespace dpt::ch12
