// stream_wait.cpp — how every NCCL call is waited for: the stream is polled
// until done, a timeout, or a peer's failure, so no rank hangs on a GPU
// kernel waiting for a peer that is gone; then the NCCL communicator is
// aborted, the only way to end such a kernel.
#include "comm/nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

cudaStream_t NcclBackend::begin() {
  DPT_CHECK(!aborted_, "the NCCL communicator was aborted after an earlier failure or timeout; "
                       "no call can use it any more");
  DPT_CUDA_CHECK(cudaSetDevice(device_));
  return static_cast<cudaStream_t>(stream_.handle());
}

void NcclBackend::abort() {
  if (aborted_) return;
  aborted_ = true;
  ncclCommAbort(comm_);  // ends kernels still waiting for peers
}

RankFailure NcclBackend::finish() {
  RankFailure failure = control_->finish();
  if (failure.any()) abort();
  return failure;
}

void NcclBackend::wait(const char* call, int peer, int tag, int64_t count) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_.handle());
  auto done = [&] {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) {
      abort();
      DPT_CUDA_CHECK(status);
    }
    ncclResult_t async_error = ncclSuccess;
    DPT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_error));
    if (async_error != ncclSuccess) {
      abort();
      DPT_FAIL("NCCL failed in " << call << ": " << ncclGetErrorString(async_error));
    }
    return false;
  };
  control_->wait_for(call, peer, tag, count, done, [&] { abort(); });
}

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
