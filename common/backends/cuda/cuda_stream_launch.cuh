// cuda_stream_launch.cuh — the `launch` callable of cuda_launches.cuh and
// cuda_half.cuh on a GPU: queues kernel<<<grid, block>>> on `stream` and turns
// a launch error into an exception. (The CPU tests pass an emulator instead.)
#pragma once

#include <cuda_runtime.h>

#include "library_check.h"

namespace dpt {
namespace cuda {

struct StreamLaunch {
  cudaStream_t stream;
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) const {
    kernel<<<grid, block, 0, stream>>>(args...);
    DPT_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace cuda
}  // namespace dpt
