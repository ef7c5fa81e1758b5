// none/cuda_kernels.cpp — kernels.h's cuda_kernels() when CMake found no CUDA
// toolkit. (With CUDA, backends/cuda/cuda_kernels.cu is built instead.)
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"

namespace dpt {

Kernels& cuda_kernels(int device) {
  DPT_FAIL("kernels for cuda:" << device << ": " << gpu::unavailable_reason());
}

}  // namespace dpt
