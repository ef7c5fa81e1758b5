// solutions/06_averaging/average.cpp — parameter averaging (spec in ch06.h).
#include "ch06.h"

#include "dpt/data_parallel.h"

namespace dpt::ch06 {

void average_parameters(Communicator& comm, std::vector<Tensor>& tensors) {
  std::vector<float> flat = flatten(tensors);  // (Σ numel,)
  comm.all_reduce(flat.data(), int64_t(flat.size()), ReduceOp::Avg);
  unflatten(flat, tensors);
}

}  // namespace dpt::ch06
