// slice_placement.cpp — reading back where attention_slices put each entry
// (slice_placement.h).
#include "slice_placement.h"

#include <algorithm>
#include <cmath>

#include "ch15.h"
#include "dpt/check.h"

namespace dpt::ch15 {

int64_t attention_entries(const GptShape& shape) { return 4 * shape.width * shape.width + 4 * shape.width; }

AttentionRanges attention_ranges(const GptShape& shape) {
  const int64_t C = shape.width;
  return {0, 3 * C * C, 3 * C * C + 3 * C, 4 * C * C + 3 * C, 4 * C * C + 4 * C};
}

namespace {
// A (dims) host tensor whose entry i holds float(first + i + 1).
Tensor numbered(const Shape& shape, int64_t first) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[std::size_t(i)] = float(first + i + 1);
  return Tensor::from_vector(shape, v, Device::host());
}

std::vector<int64_t> read_back(const Tensor& share, int64_t end) {
  std::vector<int64_t> out;
  if (!share.defined()) return out;
  for (float x : share.to_vector()) {
    const double r = std::nearbyint(double(x));
    out.push_back(r == double(x) && r >= 1 && r <= double(end) ? int64_t(r) - 1 : -1);
  }
  return out;
}
}  // namespace

SlicePlacement slice_placement(const GptShape& shape, int t, int tp) {
  const int64_t C = shape.width;
  const AttentionRanges at = attention_ranges(shape);
  DPT_CHECK(at.end < (int64_t(1) << 24), "slice_placement: width " << C << " has " << at.end
                                             << " attention entries, more than a float numbers exactly (C ≤ 2046)");
  GptBlock indexed;
  indexed.attn_weight = numbered({3 * C, C}, at.qkv_weight);
  indexed.attn_bias = numbered({3 * C}, at.qkv_bias);
  indexed.attn_proj_weight = numbered({C, C}, at.proj_weight);
  indexed.attn_proj_bias = numbered({C}, at.proj_bias);
  const AttentionSlices s = attention_slices(indexed, shape, t, tp, Device::host());
  return {read_back(s.qkv_weight, at.end), read_back(s.qkv_bias, at.end), read_back(s.proj_weight, at.end),
          read_back(s.proj_bias, at.end)};
}

void gather_attention(Communicator& group, const GptShape& shape, const std::vector<Tensor>& shares,
                      std::vector<float>& out) {
  const int tp = group.size();
  const AttentionRanges at = attention_ranges(shape);
  std::vector<SlicePlacement> where;
  for (int t = 0; t < tp; ++t) where.push_back(slice_placement(shape, t, tp));
  const std::size_t base = out.size();
  out.resize(base + std::size_t(at.proj_bias), NAN);
  for (std::size_t s = 0; s < shares.size(); ++s) {
    const std::vector<float> mine = shares[s].to_vector();
    std::vector<float> all(mine.size() * std::size_t(tp));  // block t is rank t's share (equal sizes: the laws)
    group.all_gather(mine.data(), all.data(), int64_t(mine.size()));
    for (int t = 0; t < tp; ++t) {
      const SlicePlacement& p = where[std::size_t(t)];
      const std::vector<int64_t>& idx = s == 0 ? p.qkv_weight : s == 1 ? p.qkv_bias : p.proj_weight;
      for (std::size_t i = 0; i < std::min(mine.size(), idx.size()); ++i)
        if (idx[i] >= 0 && idx[i] < at.proj_bias) out[base + std::size_t(idx[i])] = all[std::size_t(t) * mine.size() + i];
    }
  }
}

}  // namespace dpt::ch15
