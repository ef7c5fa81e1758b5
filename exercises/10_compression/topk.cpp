// exercises/10_compression/topk.cpp — hole: top-k's reconstruction from the
// all-gathered (index, value) pairs. The contract is dpt::ch10::topk_reconstruct
// in chapters/10_compression/ch10.h; hints in tiers are in
// docs/ch10_compression.md (§ Hints).
//
// Pointers:
//   - word_index(word) (compressor.h) is the index a message's word stands for.
//   - Row r of `gathered` starts at gathered.data() + r * 2 * k.
//   - dpt::Error via DPT_CHECK(cond, "sentence") (dpt/check.h) for bad input.
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void topk_reconstruct(const std::vector<float>& gathered, int world, int64_t k, std::vector<float>& mean) {
  (void)gathered, (void)world, (void)k, (void)mean;
  throw NotImplemented("ch10: topk_reconstruct — see exercises/10_compression/topk.cpp");
}

}  // namespace dpt::ch10
