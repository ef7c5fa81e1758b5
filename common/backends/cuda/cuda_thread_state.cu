// cuda_thread_state.cu — making and freeing the per (thread, GPU) state of
// cuda_thread_state.cuh.
#include "cuda_thread_state.cuh"

#include <map>
#include <memory>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "library_check.h"

namespace dpt {
namespace cuda {

// Return codes are ignored: at process exit the driver may be gone already.
// The handle is pointed back at the default stream first: this thread's
// streams (gpu_runtime.cpp) may already be destroyed.
ThreadState::~ThreadState() {
  cudaSetDevice(device);
  if (blas) {
    cublasSetStream(blas, nullptr);
    cublasDestroy(blas);
  }
  if (labels) cudaFree(labels);
  if (staged) cudaFreeHost(staged);
  if (staged_copied) cudaEventDestroy(staged_copied);
  if (partials) cudaFree(partials);
  if (column_partials) cudaFree(column_partials);
  for (void* p : captured_scratch) cudaFree(p);
  if (last_use) cudaEventDestroy(last_use);
  for (const CapturedLabels& c : captured) {
    cudaFree(c.device);
    cudaFreeHost(c.pinned);
  }
}

namespace {
thread_local std::map<int, std::unique_ptr<ThreadState>> t_states;
}  // namespace

ThreadState& thread_state(int device, std::size_t partials_bytes) {
  auto& slot = t_states[device];
  if (slot) return *slot;
  DPT_CUDA_CHECK(cudaSetDevice(device));  // the event belongs to this GPU
  auto state = std::make_unique<ThreadState>();  // freed again if a step below throws
  state->device = device;
  DPT_CUDA_CHECK(cudaEventCreateWithFlags(&state->last_use, cudaEventDisableTiming));
  DPT_CUDA_CHECK(cudaEventCreateWithFlags(&state->staged_copied, cudaEventDisableTiming));
  state->partials = gpu::allocate(device, partials_bytes);
  DPT_CHECK(state->partials, "cuda:" << device << ": no room for " << partials_bytes
                                     << " bytes of reduction scratch");
  slot = std::move(state);
  return *slot;
}

}  // namespace cuda
}  // namespace dpt
