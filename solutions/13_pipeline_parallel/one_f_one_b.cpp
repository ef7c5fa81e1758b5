// solutions/13_pipeline_parallel/one_f_one_b.cpp — 1F1B: stage s keeps at
// most P − s micro-batches in flight (the P − s − 1 stages after it each hold
// one, plus the one whose gradient comes back next), so it forwards while it
// has room and a forward left, and otherwise runs its oldest backward. That
// gives the warm-up (P − s forwards, bounded by M), the steady state (B then
// F alternating) and the cool-down (the backwards left).
#include "ch13.h"

#include <algorithm>

#include "dpt/check.h"

namespace dpt::ch13 {

std::vector<Op> one_f_one_b(int stage, int stages, int micro_batches) {
  DPT_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
            "one_f_one_b: stage " << stage << " of " << stages << " with " << micro_batches << " micro-batches");
  const int room = std::min(stages - stage, micro_batches);
  std::vector<Op> ops;
  int forwarded = 0, backwarded = 0;
  while (backwarded < micro_batches) {
    if (forwarded < micro_batches && forwarded - backwarded < room)
      ops.push_back({Pass::Forward, forwarded++});
    else
      ops.push_back({Pass::Backward, backwarded++});
  }
  return ops;
}

}  // namespace dpt::ch13
