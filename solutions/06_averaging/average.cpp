// solutions/06_averaging/average.cpp — parameter averaging (spec in ch06.h).
#include "ch06.h"

#include "dpt/flatten.h"

namespace dpt::ch06 {

void average_parameters(Communicator& comm, std::vector<Tensor>& tensors) {
  // One payload on the tensors' device (a GPU's: the all-reduce takes device
  // buffers, nothing goes through the host).
  Device& device = tensors.empty() ? Device::host() : tensors.front().device();
  Tensor flat = flatten_on(tensors, device);  // (Σ numel,)
  comm.all_reduce(flat.data(), flat.numel(), ReduceOp::Avg);
  unflatten(flat, tensors);
}

}  // namespace dpt::ch06
