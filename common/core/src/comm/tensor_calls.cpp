// tensor_calls.cpp — Communicator's Tensor overloads: check the tensor, then
// call the pointer version (communicator.cpp). Host, cpu:k and cuda:k tensors
// all work: every backend takes host and GPU pointers.
#include "dpt/comm/communicator.h"

#include "comm/gpu_floats.h"

namespace dpt {

namespace {
void check_tensor(const Tensor& t, const char* call) {
  DPT_CHECK(t.defined(), call << ": the tensor is undefined");
}
}  // namespace

void Communicator::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(tensor, "send");
  send(tensor.data(), tensor.numel(), dst, tag);
}

void Communicator::recv(Tensor tensor, int src, int tag) {
  check_tensor(tensor, "recv");
  recv(tensor.data(), tensor.numel(), src, tag);
}

void Communicator::sendrecv(const Tensor& send_tensor, int dst, Tensor recv_tensor, int src,
                            int tag) {
  check_tensor(send_tensor, "sendrecv");
  check_tensor(recv_tensor, "sendrecv");
  sendrecv(send_tensor.data(), send_tensor.numel(), dst, recv_tensor.data(), recv_tensor.numel(),
           src, tag);
}

void Communicator::all_reduce(Tensor tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce");
  all_reduce(tensor.data(), tensor.numel(), op);
}

void Communicator::reduce_scatter(const Tensor& input, Tensor output, ReduceOp op) {
  check_tensor(input, "reduce_scatter");
  check_tensor(output, "reduce_scatter");
  DPT_CHECK(input.numel() == output.numel() * size_,
            "reduce_scatter: input has " << input.numel() << " elements, expected size() x output = "
                                         << size_ << " x " << output.numel());
  reduce_scatter(input.data(), output.data(), output.numel(), op);
}

void Communicator::all_gather(const Tensor& input, Tensor output) {
  check_tensor(input, "all_gather");
  check_tensor(output, "all_gather");
  DPT_CHECK(output.numel() == input.numel() * size_,
            "all_gather: output has " << output.numel() << " elements, expected size() x input = "
                                      << size_ << " x " << input.numel());
  all_gather(input.data(), output.data(), input.numel());
}

void Communicator::broadcast(Tensor tensor, int root) {
  check_tensor(tensor, "broadcast");
  broadcast(tensor.data(), tensor.numel(), root);
}

std::shared_ptr<Work> Communicator::all_reduce_async(Tensor tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce_async");
  float* data = tensor.data();
  int64_t count = tensor.numel();
  // The job holds a handle on the tensor, so its storage outlives the call.
  return async(detail::after_queued_gpu_work(
      data, [this, tensor, data, count, op] { all_reduce(data, count, op); }));
}

}  // namespace dpt
