// exercises/02_batching/average.cpp — hole: average N gradient lists.
// The contract is dpt::ch02::average_gradients in chapters/02_batching/ch02.h;
// hints in tiers are in docs/ch02_batching.md (§ Hints).
//
// Pointers:
//   - Gradients may live in device memory the host cannot read: reach them
//     through the Tensor ops of dpt/ops.h (axpy_, scale_, …), not data().
//   - per_sample's tensors are the caller's: only read them.
// Chapter 03 does exactly this across devices.
#include "ch02.h"

#include "dpt/check.h"

namespace dpt::ch02 {

Gradients average_gradients(const std::vector<Gradients>& per_sample) {
  (void)per_sample;
  throw NotImplemented("ch02: average_gradients — see exercises/02_batching/average.cpp");
}

}  // namespace dpt::ch02
