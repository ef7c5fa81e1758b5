// exercises/03_naive_dp/host_average.cpp — hole: average gradients on the host.
// Contract: ch03::host_average_gradients in chapters/03_naive_dp/ch03.h.
//
// Pointers: Tensor::to(Device::host()) and Tensor::copy_from move a tensor
// between a device and the host; comm.send(tensor, dst) / comm.recv(tensor,
// src) move whole tensors between ranks; axpy_ and scale_ (dpt/ops.h) work
// in place. Write it with send/recv: the library collectives
// (comm.all_reduce, …) are the tests' oracle, not the hole.
// Hints, in tiers: docs/ch03_naive_dp.md, "Hints".
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads) {
  (void)comm, (void)grads;
  throw NotImplemented("ch03: host_average_gradients — see exercises/03_naive_dp/host_average.cpp");
}

}  // namespace dpt::ch03
