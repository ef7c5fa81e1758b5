// exercises/11_mixed_precision/recompute.cpp — hole: backward through a
// forward that kept only checkpoints, recomputing one segment at a time. The
// contract is dpt::ch11::recompute_backward in
// chapters/11_mixed_precision/ch11.h; hints in tiers are in
// docs/ch11_mixed_precision.md (§ Hints).
//
// Pointers:
//   - autograd.h: backward and its overloads, and which tensors' grad()
//     they fill; tensor.h: what a tensor can be asked or set.
//   - Dropping a handle (t = Tensor()) frees the tensor once no one else holds it.
#include "ch11.h"

#include "dpt/check.h"

namespace dpt::ch11 {

void recompute_backward(std::vector<Tensor>& checkpoints, const SegmentForward& forward, const LossOf& loss_of) {
  (void)checkpoints, (void)forward, (void)loss_of;
  throw NotImplemented("ch11: recompute_backward — see exercises/11_mixed_precision/recompute.cpp");
}

}  // namespace dpt::ch11
