// exercises/13_pipeline_parallel/accumulate.cpp — hole: one micro-batch's
// gradients added to the batch's. The contract is
// dpt::ch13::accumulate_micro_batch in chapters/13_pipeline_parallel/ch13.h;
// hints in tiers are in docs/ch13_pipeline_parallel.md (§ Hints).
//
// Pointers:
//   - ops.h: in-place arithmetic on tensors of any device (fill_, scale_, axpy_).
//   - ch13.h: what micro_grads holds on entry, and what batch_grads must hold
//     once every micro-batch has been added.
#include "ch13.h"

#include "dpt/check.h"

namespace dpt::ch13 {

void accumulate_micro_batch(std::vector<Tensor>& batch_grads, const std::vector<Tensor>& micro_grads,
                            int64_t micro_size, int64_t batch_size) {
  (void)batch_grads, (void)micro_grads, (void)micro_size, (void)batch_size;
  throw NotImplemented("ch13: accumulate_micro_batch — see exercises/13_pipeline_parallel/accumulate.cpp");
}

}  // namespace dpt::ch13
