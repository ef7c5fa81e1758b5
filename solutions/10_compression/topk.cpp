// solutions/10_compression/topk.cpp — top-k's decode (spec in ch10.h): every
// pair adds its value at its index; pairs of different ranks that share an
// index add up (which is why a sparse sum cannot be a ring of fixed slices).
#include "ch10.h"

#include <algorithm>

#include "dpt/check.h"

namespace dpt::ch10 {

void topk_reconstruct(const std::vector<float>& gathered, int world, int64_t k, std::vector<float>& mean) {
  DPT_CHECK(int64_t(gathered.size()) == int64_t(world) * 2 * k,
            "topk_reconstruct: expected " << world << " rows of 2·" << k << " floats, got " << gathered.size());
  std::fill(mean.begin(), mean.end(), 0.0f);
  for (int r = 0; r < world; ++r) {  // row order: the same sums on every rank
    const float* row = gathered.data() + std::size_t(r) * std::size_t(2 * k);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t index = word_index(row[j]);
      DPT_CHECK(index >= 0 && index < int64_t(mean.size()),
                "topk_reconstruct: rank " << r << " sent index " << index << ", outside 0.." << mean.size() - 1);
      mean[std::size_t(index)] += row[k + j];
    }
  }
  for (float& v : mean) v /= float(world);
}

}  // namespace dpt::ch10
