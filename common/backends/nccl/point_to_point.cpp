// point_to_point.cpp — send, recv and sendrecv as ncclSend/ncclRecv on the
// backend's stream, then a wait (stream_wait.cpp). Host buffers are staged
// through this GPU.
//
// NCCL has no eager protocol: a send completes only once its receive runs,
// so every send is a rendezvous (a ring of blocking send-then-recv times out,
// as the contract warns; sendrecv is one NCCL group, safe on a ring). NCCL has
// no tags either: `tag` only appears in timeout messages.
#include "library_check.h"
#include "nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

void NcclBackend::send(const float* data, int64_t count, int dst, int tag) {
  StagedFloats in(device_, data, count, true);
  run("send to", dst, tag, count, [&](cudaStream_t stream) {
    issued(ncclSend(in.data(), std::size_t(count), ncclFloat, dst, comm_, stream), "ncclSend");
  });
}

void NcclBackend::recv(float* data, int64_t count, int src, int tag) {
  StagedFloats out(device_, data, count, false);
  run("recv from", src, tag, count, [&](cudaStream_t stream) {
    issued(ncclRecv(out.data(), std::size_t(count), ncclFloat, src, comm_, stream), "ncclRecv");
  });
  out.write_back();
}

void NcclBackend::sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                           int64_t recv_count, int src, int tag) {
  StagedFloats in(device_, send_buf, send_count, true), out(device_, recv_buf, recv_count, false);
  run("sendrecv with", dst, tag, send_count, [&](cudaStream_t stream) {
    // One group: NCCL starts both together, so a ring of sendrecv cannot deadlock.
    DPT_NCCL_CHECK(ncclGroupStart());
    ncclResult_t sent = ncclSend(in.data(), std::size_t(send_count), ncclFloat, dst, comm_, stream);
    ncclResult_t received = ncclRecv(out.data(), std::size_t(recv_count), ncclFloat, src, comm_, stream);
    issued(ncclGroupEnd(), "ncclGroupEnd");  // always closed, even when a call above failed
    issued(sent, "ncclSend");
    issued(received, "ncclRecv");
  });
  out.write_back();
}

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
