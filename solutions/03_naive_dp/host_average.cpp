// solutions/03_naive_dp/host_average.cpp — gather to the host, average, send back.
#include "ch03.h"

#include "dpt/ops.h"

namespace dpt::ch03 {

void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads) {
  const int root = 0, world = comm.size();
  for (Tensor& grad : grads) {
    Tensor host = grad.to(Device::host());  // device → host
    if (comm.rank() == root) {
      // The host sums in one order, once: every rank then gets these bits.
      Tensor incoming = Tensor::empty(host.shape(), Device::host());
      for (int r = 1; r < world; ++r) {
        comm.recv(incoming, r);
        axpy_(host, 1.0f, incoming);
      }
      scale_(host, 1.0f / float(world));  // the loss is a mean: so is its gradient
      for (int r = 1; r < world; ++r) comm.send(host, r);
    } else {
      comm.send(host, root);  // rank 0 is summing …
      comm.recv(host, root);  // … and sends the mean back
    }
    grad.copy_from(host);  // host → device
  }
}

}  // namespace dpt::ch03
