// stream_wait.cpp — how every NCCL call is waited for: the communicator's
// state (ncclInProgress while a non-blocking call is still being issued,
// e.g. connecting to its peer) and then the stream are polled until done, a
// timeout, or a peer's failure, so no rank hangs on a GPU kernel or a
// connection waiting for a peer that is gone; then the NCCL communicator is
// aborted, the only way to end such a wait.
#include "library_check.h"
#include "nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

cudaStream_t NcclBackend::begin() {
  DPT_CHECK(!aborted_, "the NCCL communicator was aborted after an earlier failure or timeout; "
                       "no call can use it any more");
  DPT_CUDA_CHECK(cudaSetDevice(device_));
  // NCCL's stream waits (on the GPU) for what the caller queued on its own:
  // the kernels that wrote the buffers, a Floats scratch allocated there.
  caller_done_.record(gpu::current_stream(device_));
  stream_.wait(caller_done_);
  return static_cast<cudaStream_t>(stream_.handle());
}

void NcclBackend::issued(ncclResult_t result, const char* what) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  abort();
  DPT_FAIL(what << " failed: " << ncclGetErrorString(result));
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
    // First the communicator: until it leaves ncclInProgress the work may
    // not be on the stream yet (an empty stream would read as done).
    ncclResult_t state = ncclSuccess;
    DPT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclInProgress) return false;
    if (state != ncclSuccess) {
      abort();
      DPT_FAIL("NCCL failed in " << call << ": " << ncclGetErrorString(state));
    }
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) {
      abort();
      DPT_CUDA_CHECK(status);
    }
    return false;
  };
  // NCCL's messages do not pass through MPI, so MPI cannot say what the peer
  // sent: the evidence is "not known".
  control_->wait_for(call, peer, tag, count, done, [&] { abort(); }, [&] { return mpi::peer_evidence(call, peer, -1); });
}

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
