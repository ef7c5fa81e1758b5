// emulated_kernels.cpp — LaunchedKernels (common/backends/cuda/cuda_launches.cuh), the
// very Kernels calls the GPU runs, over a host whose launch is the
// emulator's, whose scratch is host vectors, and whose labels are read where
// they are (host memory is this device's memory).
//
// Scratch is poisoned on every acquire: all bits set (NaN as a float or a
// double, the largest count as an unsigned long long). A GPU's scratch holds
// whatever the last call left; zeros would be the identity of every
// reduction here and hide a pass that reads a partial nobody wrote.
#include "support/emulated_kernels.h"

#include <cstring>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "support/cuda_emulator.h"  // before the kernel headers: they compile as C++ for it

#include "cuda_launches.cuh"

namespace dpt_test {
namespace {
using namespace dpt::cuda;

class EmulatedKernels final : public LaunchedKernels<EmulatedKernels> {
 public:
  void gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*) override {
    DPT_FAIL("gemm is cuBLAS's on a GPU: the emulator runs dpt's own kernels only");
  }
  void gemm_batched(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                    float*, int64_t, int64_t) override {
    DPT_FAIL("gemm_batched is cuBLAS's on a GPU: the emulator runs dpt's own kernels only");
  }
  // The 16-bit ops are cuda_half.cu's launches (test_half_emulated.cpp runs their plans).
  void round_half(float*, int64_t, dpt::Half, dpt::math::RoundingCounts*) override {
    DPT_FAIL("round_half is cuda_half.cu's on a GPU: test_half_emulated.cpp runs its kernel");
  }
  void gemm_half(dpt::Half, bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*) override {
    DPT_FAIL("gemm_half is cuBLAS's on a GPU: the emulator runs dpt's own kernels only");
  }
  int64_t count_inf_or_nan(const float*, int64_t) override {
    DPT_FAIL("count_inf_or_nan is cuda_half.cu's on a GPU: test_half_emulated.cpp runs its kernel");
  }

 private:
  friend class LaunchedKernels<EmulatedKernels>;

  struct Scratch {
    std::vector<unsigned long long> partials = std::vector<unsigned long long>(kMaxPartials + 1);
    std::vector<float> columns;  // grow-only, as the GPU's
  };
  template <typename T>
  static void poison(std::vector<T>& v) {
    if (!v.empty()) std::memset(static_cast<void*>(v.data()), 0xff, v.size() * sizeof(T));
  }

  emulator::Launch launcher() { return {}; }
  Scratch& acquire() {
    poison(scratch_.partials);
    poison(scratch_.columns);
    return scratch_;
  }
  void release(Scratch&) {}
  void* partials(Scratch& s) { return s.partials.data(); }
  float* column_partials(Scratch& s, int64_t count) {
    if (std::size_t(count) > s.columns.size()) {
      s.columns.resize(std::size_t(count));
      poison(s.columns);
    }
    return s.columns.data();
  }
  const int64_t* labels(Scratch&, const int64_t* host, int64_t) { return host; }
  template <typename T>
  void read_back(T* host, const T* result) {
    *host = *result;
  }
  std::string where() const { return "the emulated GPU"; }

  Scratch scratch_;
};
}  // namespace

dpt::Kernels& emulated_cuda_kernels() {
  static EmulatedKernels kernels;
  return kernels;
}

}  // namespace dpt_test
