// gpu_floats.h — what the communicators need, beyond dpt/floats.h, to move
// floats that may live on a GPU: waiting for a buffer's queued GPU work,
// staging a buffer in the memory a backend takes, and a reduction over
// several ranks' buffers on one GPU.
//
// Host buffers take the same path as before GPUs existed: copy_floats() is a
// memcpy when both sides are host memory (asking where a pointer lives costs
// one branch in a build or on a machine without a GPU). Device buffers are
// copied through gpu::copy on the calling thread's current stream and
// reduced with kernels.h's CUDA kernels.
//
// Left out: peer-to-peer kernels across GPUs (every GPU reads its peers'
// buffers through copies into its own scratch), overlap of copy and compute.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dpt/comm/communicator.h"
#include "dpt/floats.h"

namespace dpt {
namespace detail {

/// Blocks until the calling thread's work on the GPU holding `ptr` is done (a
/// no-op for host memory): a peer may read `ptr` next, from its own stream.
void finish_gpu_work(const void* ptr);

/// `op`, made to wait first for the GPU work the calling thread has queued so
/// far on its current stream of the GPU holding `data` (`op` itself for host
/// memory; work on a stream held outside any StreamGuard is the caller's to
/// order first). For work that
/// runs on another thread (the progress thread), whose streams know nothing
/// of this thread's kernels.
std::function<void()> after_queued_gpu_work(const void* data, std::function<void()> op);

/// One buffer of a call, as a backend that takes only memory `home` (-1: host,
/// k: GPU k) sees it: the buffer itself when it lives there, else a copy there
/// (filled from the buffer when the call reads it). MPI stages GPU buffers
/// through the host with it, NCCL host buffers through its GPU.
class StagedFloats {
 public:
  /// Stages buffer[0, count) in `home` if it lives elsewhere; `read`: the
  /// call reads it, so the copy starts with its contents.
  StagedFloats(int home, const float* buffer, int64_t count, bool read);
  ~StagedFloats();
  StagedFloats(const StagedFloats&) = delete;
  StagedFloats& operator=(const StagedFloats&) = delete;
  /// What to hand the backend.
  float* data() const { return data_; }
  /// Copies what the call wrote back into the buffer (nothing if it was used directly).
  void write_back();

 private:
  float* buffer_;
  int64_t count_;
  float* data_;
  std::unique_ptr<Floats> copy_;  // the staged copy, when the buffer lives elsewhere
};

/// out (count,) = op over inputs[0..n) (each (count,), anywhere), in input
/// order, on GPU `device` where `out` lives; `staging` is count floats on that
/// GPU. Sum and Avg add with the CUDA kernels (the same adds in the same
/// order as the host loop, so the same bits); Avg then divides by n, as the
/// host does (a true division, not a product with 1/n: the same bits for
/// every n). Max goes through host memory (kernels.h has no max).
/// Complete when it returns.
void reduce_on_gpu(int device, float* out, const float* const* inputs, int n, int64_t count,
                   ReduceOp op, float* staging);

}  // namespace detail
}  // namespace dpt
