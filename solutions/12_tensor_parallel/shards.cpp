// solutions/12_tensor_parallel/shards.cpp — which slice of a weight a rank
// owns, and the slices put back together. Output features are rows of a
// (out, in) weight: a contiguous block. Input features are columns: in
// row-major storage, one short run per row.
#include <vector>

#include "ch12.h"
#include "dpt/check.h"

namespace dpt::ch12 {

Tensor shard_weight(const Tensor& full, Split split, int rank, int ranks, Device& device) {
  DPT_CHECK(full.dim() == 2 || (full.dim() == 1 && split == Split::Output),
            "shard_weight: expects a weight (out, in) or, split by output, a bias (out,); got " << shape_str(full.shape()));
  DPT_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "shard_weight: rank " << rank << " of " << ranks);
  const int64_t split_size = split == Split::Output ? full.size(0) : full.size(1);
  DPT_CHECK(split_size % ranks == 0, "shard_weight: " << split_size << (split == Split::Output ? " outputs" : " inputs")
                                                      << " do not divide among " << ranks << " ranks");
  const int64_t k = split_size / ranks, begin = rank * k;
  if (split == Split::Output) return full.rows(begin, begin + k).to(device);
  const int64_t out = full.size(0), in = full.size(1);
  std::vector<float> mine(std::size_t(out * k));
  const float* w = full.data();
  for (int64_t i = 0; i < out; ++i)
    for (int64_t j = 0; j < k; ++j) mine[std::size_t(i * k + j)] = w[i * in + begin + j];
  return Tensor::from_vector({out, k}, mine, device);
}

Tensor gather_weight(Communicator& group, const Tensor& shard, Split split) {
  const int ranks = group.size();
  Tensor all = Tensor::empty({ranks * shard.numel()}, shard.device());
  group.all_gather(shard, all);  // block t = rank t's slice, as it is stored
  Tensor host = all.to(Device::host());
  if (split == Split::Output) {
    Shape shape = shard.shape();
    shape[0] *= ranks;  // the blocks stacked: rows t·k … (t+1)·k − 1 are rank t's
    return host.reshape(shape);
  }
  const int64_t out = shard.size(0), k = shard.size(1), in = k * ranks;
  Tensor full = Tensor::empty({out, in}, Device::host());
  const float* blocks = host.data();
  float* w = full.data();
  for (int t = 0; t < ranks; ++t)
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < k; ++j) w[i * in + t * k + j] = blocks[(t * out + i) * k + j];
  return full;
}

}  // namespace dpt::ch12
