// exercises/02_batching/accumulate.cpp — hole: gradient accumulation.
// The contract is dpt::ch02::accumulated_gradient in chapters/02_batching/ch02.h;
// hints in tiers are in docs/ch02_batching.md (§ Hints).
//
// Pointers:
//   - The moves are chapter 01's: model.forward, softmax_cross_entropy and
//     scale (dpt/ops.h), loss.backward() (dpt/autograd.h), p.grad(), p.zero_grad().
//   - batch.x.rows(begin, end) is a view of some rows; batch.y holds the labels.
//   - Before you write code, work out on paper what 10 samples in 3
//     micro-batches must give, and how 10 samples make 6 micro-batches.
#include "ch02.h"

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

Gradients accumulated_gradient(const MLP& model, const Batch& batch, int micro_batches) {
  (void)model, (void)batch, (void)micro_batches;
  throw NotImplemented("ch02: accumulated_gradient — see exercises/02_batching/accumulate.cpp");
}

}  // namespace dpt::ch02
