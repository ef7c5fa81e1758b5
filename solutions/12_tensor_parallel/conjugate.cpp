// solutions/12_tensor_parallel/conjugate.cpp — the two conjugate operators.
// f: the identity forward, an all-reduce of the gradient backward (each
// rank's slice contributed only its share of d loss / dx). g: an all-reduce
// forward (each rank held a share of the output), the identity backward (the
// replicated layers above hand every rank the same, whole gradient).
#include "ch12.h"

#include "dpt/autograd.h"

namespace dpt::ch12 {

Tensor copy_to_tp_region(Communicator& group, const Tensor& x) {
  Communicator* comm = &group;  // the graph outlives this call: keep a pointer, not a reference to a local
  return record(x.clone(), "copy_to_tp_region", {x}, [comm](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = dout.clone();
    comm->all_reduce(dx, ReduceOp::Sum);
    return {dx};
  });
}

Tensor reduce_from_tp_region(Communicator& group, const Tensor& partial) {
  Tensor sum = partial.clone();
  group.all_reduce(sum, ReduceOp::Sum);
  return record(sum, "reduce_from_tp_region", {partial},
                [](const Tensor& dout) -> std::vector<Tensor> { return {dout.clone()}; });
}

}  // namespace dpt::ch12
