// cuda_thread_state.cuh — what each (thread, GPU) pair keeps for the CUDA
// kernels (cuda_kernels.cu): a cuBLAS handle (a handle is not meant to be
// shared by threads), the buffer host labels are copied into, and the
// reductions' partials. Rank threads sharing a GPU thus never write into each
// other's buffers; a thread's own uses of its buffers are ordered by its
// stream (and by an event when a StreamGuard moved it to another stream).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpt {
namespace cuda {

struct ThreadState {
  int device = -1;
  cublasHandle_t blas = nullptr;
  int64_t* labels = nullptr;  // device copy of the last host labels
  std::size_t label_capacity = 0;
  int64_t* staged = nullptr;     // pinned host copy of them: an asynchronous copy's source
  int64_t staged_rows = -1;      // how many (-1: none yet)
  cudaEvent_t staged_copied = nullptr;  // recorded after the copy out of `staged`
  void* partials = nullptr;  // kMaxPartials 8-byte partials, then one 8-byte result
  float* column_partials = nullptr;  // sum_rows' (chunks, cols) partials outside captures; grow-only
  std::size_t column_partials_capacity = 0;  // floats
  std::vector<void*> captured_scratch;  // partials of captured reductions, a CUDA graph's own: kept until the thread ends
  cudaEvent_t last_use = nullptr;
  cudaStream_t last_stream = nullptr;
  struct CapturedLabels {  // labels a CUDA graph's replays copy in: never rewritten
    int64_t* device;
    void* pinned;
    int64_t rows;
  };
  std::vector<CapturedLabels> captured;

  ~ThreadState();
};

/// The calling thread's state for GPU `device`, made on first use (events and
/// `partials_bytes` of reduction scratch on that GPU); freed when the thread ends.
ThreadState& thread_state(int device, std::size_t partials_bytes);

/// The calling thread's cuBLAS handle for GPU `device` (made on first use,
/// with that GPU current): its state's, with the partials cuda_kernels.cu sizes.
cublasHandle_t thread_blas(int device);

}  // namespace cuda
}  // namespace dpt
