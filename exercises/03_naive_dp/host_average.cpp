// exercises/03_naive_dp/host_average.cpp — hole: average gradients on the host.
//
// Rank 0 plays the host (the CPU holding the master copy). One step:
//
//   every rank r > 0:   host = grads[p].to(Device::host())      (device → host)
//                       comm.send(host, 0)                       for every p
//                       comm.recv(host, 0) …                     wait for the mean
//                       grads[p].copy_from(host)                 (host → device)
//   rank 0:             sum = its own grads on the host, then for r = 1 … N−1
//                       comm.recv(buffer, r) and add it        (rank order!)
//                       scale by 1/N, send the mean to every r, copy it back
//
// Everything goes through rank 0: it receives (N−1)·S bytes and sends
// (N−1)·S bytes per step. Chapter 04 removes that bottleneck.
// Hints: Tensor::to, Tensor::copy_from, dpt::axpy_ and dpt::scale_ (dpt/ops.h);
// comm.send(tensor, dst) / comm.recv(tensor, src) take whole tensors.
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads) {
  (void)comm, (void)grads;
  throw NotImplemented("ch03: host_average_gradients — see exercises/03_naive_dp/host_average.cpp");
}

}  // namespace dpt::ch03
