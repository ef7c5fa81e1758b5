// exercises/12_tensor_parallel/conjugate.cpp — hole: the two operators that
// join a rank's slice of a layer to the replicated rest of the model. The
// contracts are dpt::ch12::copy_to_tp_region and dpt::ch12::reduce_from_tp_region
// in chapters/12_tensor_parallel/ch12.h; hints in tiers are in
// docs/ch12_tensor_parallel.md (§ Hints).
//
// Pointers:
//   - dpt::record(output, "name", {inputs…}, backward) (dpt/autograd.h) makes
//     an op of your own: `backward` gets d loss / d output and returns
//     d loss / d input for each input, in order. ops.cpp's linear() is one.
//   - group.all_reduce(tensor, ReduceOp::Sum) works in place on any device;
//     tensor.clone() copies. A backward closure runs after your function has
//     returned: it may use `group` (captured as [&group] or a pointer: the
//     communicator outlives training), never a local variable by reference.
#include "ch12.h"

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch12 {

Tensor copy_to_tp_region(Communicator& group, const Tensor& x) {
  (void)group, (void)x;
  throw NotImplemented("ch12: copy_to_tp_region — see exercises/12_tensor_parallel/conjugate.cpp");
}

Tensor reduce_from_tp_region(Communicator& group, const Tensor& partial) {
  (void)group, (void)partial;
  throw NotImplemented("ch12: reduce_from_tp_region — see exercises/12_tensor_parallel/conjugate.cpp");
}

}  // namespace dpt::ch12
