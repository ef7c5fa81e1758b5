// topk_select.cpp — topk_select.h: the K largest |x| by a threshold on their bits.
#include "topk_select.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "dpt/check.h"

namespace dpt::ch10 {

namespace {
// |x|'s bits: for non-NaN floats, a larger key is a larger magnitude.
inline uint32_t magnitude_key(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b & 0x7fffffffu;
}

// mask bit i (word i/32, bit i%32) = key(v[i]) >= floor, for i < n; returns how many are set.
int64_t mark_at_least(const float* v, int64_t n, uint32_t floor, std::vector<uint32_t>& mask) {
  mask.assign(std::size_t((n + 31) / 32), 0);
  int64_t marked = 0;
  for (int64_t w = 0; w < int64_t(mask.size()); ++w) {
    const float* word = v + 32 * w;
    uint32_t bits = 0;
    if (32 * w + 32 <= n) {
      for (int b = 0; b < 32; ++b) bits |= uint32_t(magnitude_key(word[b]) >= floor) << b;  // a whole word: vector code
    } else {
      for (int b = 0; b < n - 32 * w; ++b) bits |= uint32_t(magnitude_key(word[b]) >= floor) << b;
    }
    mask[std::size_t(w)] = bits;
    marked += __builtin_popcount(bits);
  }
  return marked;
}
}  // namespace

std::vector<int64_t> top_k_indices(const std::vector<float>& x, int64_t k) {
  const int64_t n = int64_t(x.size());
  DPT_CHECK(k >= 0 && k <= n, "top_k_indices: k must be from 0 to " << n << ", got " << k);
  if (k == 0) return {};
  const float* v = x.data();
  // 1. A lower bound from every stride-th key: the sample's rank that K
  //    would have in it, plus a margin of a quarter and 16 keys.
  const int64_t stride = std::max<int64_t>(1, n / 4096);
  std::vector<uint32_t> sample;
  for (int64_t i = 0; i < n; i += stride) sample.push_back(magnitude_key(v[i]));
  int64_t rank = std::min<int64_t>(int64_t(sample.size()), (k * int64_t(sample.size()) / n) * 5 / 4 + 16);
  // 2. Mark every key >= the bound; too few marked: a lower bound (4x the rank), at worst 0.
  std::vector<uint32_t> mask;
  int64_t marked = 0;
  for (;;) {
    uint32_t floor = 0;
    if (rank < int64_t(sample.size())) {
      std::nth_element(sample.begin(), sample.begin() + (rank - 1), sample.end(), std::greater<uint32_t>());
      floor = sample[std::size_t(rank - 1)];
    }
    marked = mark_at_least(v, n, floor, mask);
    if (marked >= k) break;
    rank = std::min<int64_t>(int64_t(sample.size()), 4 * rank);  // floor was > 0 here: marked >= k once it is 0
  }
  // 3. The marked indices, in order, and their keys; the K-th largest key is
  //    the threshold; of the keys equal to it, the first `ties` are sent.
  std::vector<int64_t> marked_index(static_cast<std::size_t>(marked));
  std::vector<uint32_t> keys(static_cast<std::size_t>(marked));
  int64_t m = 0;
  for (int64_t w = 0; w < int64_t(mask.size()); ++w)
    for (uint32_t bits = mask[std::size_t(w)]; bits != 0; bits &= bits - 1) {
      const int64_t i = 32 * w + __builtin_ctz(bits);
      marked_index[std::size_t(m)] = i, keys[std::size_t(m++)] = magnitude_key(v[i]);
    }
  std::vector<uint32_t> order = keys;
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), std::greater<uint32_t>());
  const uint32_t threshold = order[std::size_t(k - 1)];
  int64_t ties = k - std::count_if(keys.begin(), keys.end(), [&](uint32_t key) { return key > threshold; });
  std::vector<int64_t> chosen;
  chosen.reserve(std::size_t(k));
  for (int64_t j = 0; j < marked; ++j)
    if (keys[std::size_t(j)] > threshold || (keys[std::size_t(j)] == threshold && ties-- > 0)) chosen.push_back(marked_index[std::size_t(j)]);
  return chosen;
}

}  // namespace dpt::ch10
