// none/gpu_half_lt.cpp — dpt/gpu_half_lt.h when CMake found no CUDA toolkit:
// planning a cuBLASLt GEMM says so. (With CUDA, backends/cuda/cuda_half_lt.cpp
// is built instead.)
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half_lt.h"

namespace dpt::gpu {

struct LtGemm::Plan {};

LtGemm::LtGemm(int device, Half, bool, bool, int64_t, int64_t, int64_t, Epilogue epilogue, const LtOperands&) {
  DPT_FAIL("a cuBLASLt " << epilogue_name(epilogue) << " GEMM on cuda:" << device << ": " << unavailable_reason());
}
LtGemm::~LtGemm() = default;
void LtGemm::run() const { DPT_FAIL("LtGemm::run: " << unavailable_reason()); }

}  // namespace dpt::gpu
