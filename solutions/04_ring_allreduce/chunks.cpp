// solutions/04_ring_allreduce/chunks.cpp — the ring's chunks (spec: ch04.h).
//
// count = base·n + extra with 0 ≤ extra < n: the first `extra` chunks take
// base + 1 elements, the rest base. Chunk i starts after i chunks of base
// and min(i, extra) extra elements.
#include "ch04.h"

#include <algorithm>

#include "dpt/check.h"

namespace dpt::ch04 {

Chunk ring_chunk(int64_t count, int n, int i) {
  DPT_CHECK(count >= 0 && n >= 1 && i >= 0 && i < n,
            "ring_chunk: asked for chunk " << i << " of " << n << " over " << count
                                           << " elements; needs count >= 0, n >= 1 and 0 <= i < n");
  const int64_t base = count / n, extra = count % n;
  const int64_t begin = i * base + std::min<int64_t>(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace dpt::ch04
