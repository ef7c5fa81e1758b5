// none/gpu_half.cpp — dpt/gpu_half.h when CMake found no CUDA toolkit: each
// call says so. (With CUDA, backends/cuda/cuda_half.cu is built instead.)
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"

namespace dpt::gpu {

namespace {
void unavailable(const char* what, int device) {
  DPT_FAIL(what << " on cuda:" << device << ": " << unavailable_reason());
}
}  // namespace

void round_to_half(uint16_t*, const float*, int64_t, Half, int device) { unavailable("round_to_half", device); }
void widen_half(float*, const uint16_t*, int64_t, Half, int device) { unavailable("widen_half", device); }
void gemm_half(int device, Half, bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, const uint16_t*, float,
               float*) {
  unavailable("gemm_half", device);
}
void gemm_half(int device, Half, bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, const uint16_t*, float,
               uint16_t*) {
  unavailable("gemm_half", device);
}
void add_bias_relu_half(uint16_t*, const float*, int64_t, int64_t, bool, Half, int device) {
  unavailable("add_bias_relu_half", device);
}
void relu_backward_half(uint16_t*, const uint16_t*, int64_t, Half, int device) {
  unavailable("relu_backward_half", device);
}

void round_floats(float*, int64_t, Half, int device, math::RoundingCounts*) { unavailable("round_floats", device); }
int64_t count_inf_or_nan(const float*, int64_t, int device) {
  unavailable("count_inf_or_nan", device);
  return 0;
}

}  // namespace dpt::gpu
