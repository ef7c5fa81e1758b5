// emulated_kernels.cpp — CudaKernels' calls (common/cuda/cuda_kernels.cu)
// with the emulator's launch in place of the stream's, host vectors for the
// scratch, and the labels read where they are (host memory is the device's).
#include "support/emulated_kernels.h"

#include <vector>

#include "dpt/check.h"
#include "support/cuda_emulator.h"  // before the kernel headers: they compile as C++ for it

#include "cuda_launches.cuh"

namespace dpt_test {
namespace {
using namespace dpt::cuda;
using dpt::AdamStep;

class EmulatedKernels final : public dpt::Kernels {
 public:
  void gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*) override {
    DPT_FAIL("gemm is cuBLAS's on a GPU: the emulator runs dpt's own kernels only");
  }
  void axpy(float* y, float alpha, const float* x, int64_t n) override {
    launch_elementwise(launch_, axpy_kernel, n, y, alpha, x, n);
  }
  void scale(float* x, float s, int64_t n) override { launch_elementwise(launch_, scale_kernel, n, x, s, n); }
  void divide(float* x, float d, int64_t n) override { launch_elementwise(launch_, divide_kernel, n, x, d, n); }
  void fill(float* x, float value, int64_t n) override { launch_elementwise(launch_, fill_kernel, n, x, value, n); }
  void add(float* out, const float* a, const float* b, int64_t n) override {
    launch_elementwise(launch_, add_kernel, n, out, a, b, n);
  }
  void sub(float* out, const float* a, const float* b, int64_t n) override {
    launch_elementwise(launch_, sub_kernel, n, out, a, b, n);
  }
  void mul(float* out, const float* a, const float* b, int64_t n) override {
    launch_elementwise(launch_, mul_kernel, n, out, a, b, n);
  }
  void scaled_copy(float* out, const float* a, float s, int64_t n) override {
    launch_elementwise(launch_, scaled_copy_kernel, n, out, a, s, n);
  }
  void scale_by_scalar(float* out, const float* a, const float* scalar, float multiplier, float divisor,
                       int64_t n) override {
    launch_elementwise(launch_, scale_by_scalar_kernel, n, out, a, scalar, multiplier, divisor, n);
  }
  void fill_from_scalar(float* out, const float* scalar, float multiplier, float divisor, int64_t n) override {
    launch_elementwise(launch_, fill_from_scalar_kernel, n, out, scalar, multiplier, divisor, n);
  }
  void relu(float* out, const float* x, int64_t n) override { launch_elementwise(launch_, relu_kernel, n, out, x, n); }
  void relu_backward(float* dx, const float* x, const float* dout, int64_t n) override {
    launch_elementwise(launch_, relu_backward_kernel, n, dx, x, dout, n);
  }
  void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    launch_elementwise(launch_, add_bias_kernel, rows * cols, y, bias, rows, cols);
  }
  void sum_rows(float* dbias, const float* dy, int64_t rows, int64_t cols) override {
    std::vector<float> partials(std::size_t(column_sum_partials(rows, cols)));
    launch_column_sums(launch_, dbias, dy, rows, cols, partials.data());
  }
  void sum(float* out, const float* x, int64_t n) override {
    launch_reduce(launch_, LoadValue{x}, Add{}, n, float_partials(), out);
  }
  void sum_squares(float* out, const float* x, int64_t n) override {
    launch_reduce(launch_, LoadSquare{x}, Add{}, n, float_partials(), out);
  }
  void softmax_cross_entropy(float* probs, float* loss, const float* logits, const int64_t* labels, int64_t rows,
                             int64_t classes) override {
    std::vector<double> partials(kMaxPartials);
    launch_softmax_cross_entropy(launch_, probs, loss, logits, labels, rows, classes, partials.data());
  }
  void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels, const float* dloss,
                                      int64_t rows, int64_t classes) override {
    launch_elementwise(launch_, softmax_cross_entropy_backward_kernel, rows * classes, dlogits, probs, labels, dloss,
                       rows, classes);
  }
  void sgd_step(float* p, const float* g, float lr, float weight_decay, int64_t n) override {
    launch_elementwise(launch_, sgd_kernel, n, p, g, lr, weight_decay, n);
  }
  void momentum_step(float* p, float* v, const float* g, float lr, float momentum, float weight_decay, bool first,
                     int64_t n) override {
    launch_elementwise(launch_, momentum_kernel, n, p, v, g, lr, momentum, weight_decay, first, n);
  }
  void adam_step(float* p, float* m, float* v, const float* g, const AdamStep& step, int64_t n) override {
    launch_elementwise(launch_, adam_kernel, n, p, m, v, g, step, n);
  }
  int64_t count_correct(const float* logits, const int64_t* labels, int64_t rows, int64_t classes) override {
    if (rows == 0 || classes == 0) return 0;
    std::vector<unsigned long long> partials(kMaxPartials + 1);
    launch_count_correct(launch_, logits, labels, rows, classes, partials.data(), partials.data() + kMaxPartials);
    return int64_t(partials[kMaxPartials]);
  }
  float max_abs_diff(const float* a, const float* b, int64_t n) override {
    float worst = 0.0f;
    launch_reduce(launch_, LoadAbsDiff{a, b}, NanAwareMax{}, n, float_partials(), &worst);
    return worst;
  }

 private:
  float* float_partials() {
    partials_.assign(kMaxPartials, 0.0f);
    return partials_.data();
  }
  emulator::Launch launch_;
  std::vector<float> partials_;
};
}  // namespace

dpt::Kernels& emulated_cuda_kernels() {
  static EmulatedKernels kernels;
  return kernels;
}

}  // namespace dpt_test
