// collectives.cpp — the library collectives as NCCL calls: a preflight over
// MPI (every rank makes the same call), host buffers staged through this GPU,
// one NCCL call on the backend's stream, a wait (stream_wait.cpp).
//
// NCCL's in-place forms are used as NCCL defines them (all_gather: send_buf
// is row rank() of recv_buf; reduce_scatter: recv_buf is row rank() of
// send_buf); any other overlap is staged, as the contract allows it.
#include "nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

void NcclBackend::divide_for_avg(float* data, int64_t count, ReduceOp op) {
  if (op != ReduceOp::Avg || count == 0) return;
  gpu::CurrentDeviceGuard keep;  // data may live on another GPU than device_
  divide_floats(data, count, float(control_->size()));
  // Like NCCL's own result, the quotient is complete when the call returns.
  if (gpu_of(data) >= 0) gpu::current_stream(gpu_of(data)).synchronize();
}

void NcclBackend::all_reduce(float* data, int64_t count, ReduceOp op) {
  control_->preflight({Collective::AllReduce, count, 0, op});
  StagedFloats both(device_, data, count, true);
  run("all_reduce", -1, 0, count, [&](cudaStream_t stream) {
    issued(ncclAllReduce(both.data(), both.data(), std::size_t(count), ncclFloat, nccl_op(op), comm_, stream),
           "ncclAllReduce");
  });
  both.write_back();
  divide_for_avg(data, count, op);
}

void NcclBackend::reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                                 ReduceOp op) {
  control_->preflight({Collective::ReduceScatter, recv_count, 0, op});
  const int size = control_->size(), rank = control_->rank();
  StagedFloats in(device_, send_buf, recv_count * size, true);
  bool in_place = recv_buf == send_buf + int64_t(rank) * recv_count;
  bool aliased = in.data() == send_buf && overlaps(recv_buf, 4 * recv_count, send_buf, 4 * recv_count * size);
  // NCCL writes recv_buf itself when it is on this GPU and does not overlap
  // what NCCL reads (or overlaps it in NCCL's in-place form).
  bool direct = gpu_of(recv_buf) == device_ && (!aliased || in_place);
  Floats scratch(device_, direct ? 0 : recv_count);
  float* out = direct ? recv_buf : scratch.data();
  run("reduce_scatter", -1, 0, recv_count * size, [&](cudaStream_t stream) {
    issued(ncclReduceScatter(in.data(), out, std::size_t(recv_count), ncclFloat, nccl_op(op), comm_, stream),
           "ncclReduceScatter");
  });
  if (!direct) copy_floats(recv_buf, out, recv_count);
  divide_for_avg(recv_buf, recv_count, op);
}

void NcclBackend::all_gather(const float* send_buf, float* recv_buf, int64_t send_count) {
  control_->preflight({Collective::AllGather, send_count, 0, ReduceOp::Sum});
  const int size = control_->size(), rank = control_->rank();
  StagedFloats out(device_, recv_buf, send_count * size, false);
  bool in_place = send_buf == recv_buf + int64_t(rank) * send_count;
  bool aliased = out.data() == recv_buf && overlaps(recv_buf, 4 * send_count * size, send_buf, 4 * send_count);
  // NCCL reads send_buf itself when it is on this GPU and is not overwritten
  // by NCCL's output (or overlaps it in NCCL's in-place form).
  bool direct = gpu_of(send_buf) == device_ && (!aliased || in_place);
  Floats scratch(device_, direct ? 0 : send_count);
  if (!direct) copy_floats(scratch.data(), send_buf, send_count);
  const float* in = direct ? send_buf : scratch.data();
  run("all_gather", -1, 0, send_count, [&](cudaStream_t stream) {
    issued(ncclAllGather(in, out.data(), std::size_t(send_count), ncclFloat, comm_, stream), "ncclAllGather");
  });
  out.write_back();
}

void NcclBackend::broadcast(float* data, int64_t count, int root) {
  control_->preflight({Collective::Broadcast, count, root, ReduceOp::Sum});
  StagedFloats both(device_, data, count, true);
  run("broadcast", -1, 0, count, [&](cudaStream_t stream) {
    issued(ncclBroadcast(both.data(), both.data(), std::size_t(count), ncclFloat, root, comm_, stream),
           "ncclBroadcast");
  });
  both.write_back();
}

void NcclBackend::barrier() {
  control_->preflight({Collective::Barrier, 0, 0, ReduceOp::Sum});
  // The preflight already waited for every rank; one float through NCCL
  // makes every GPU reach this point too.
  run("barrier", -1, 0, 1, [&](cudaStream_t stream) {
    issued(ncclAllReduce(barrier_scratch_.data(), barrier_scratch_.data(), 1, ncclFloat, ncclSum, comm_, stream),
           "ncclAllReduce");
  });
}

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
