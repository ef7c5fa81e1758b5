// test_gpu_batch_norm.cpp — batch normalization on cuda:0: the kernel specs of
// support/batch_norm_checks.h (the emulator runs them too,
// tests/core/test_batch_norm_kernels_emulated.cpp) at GPU sizes, and the op
// itself (forward, running statistics, backward, evaluation) against the
// same op on cpu:0, as test_gpu_ops.cpp does for the others.
//
// The op's tolerance is test_gpu_ops.cpp's, 1e-5 normwise relative: its sums
// run over ≤ 512 rows, each side within ~√512·2⁻²⁴ ≈ 1.4e-6 of the partial
// sums (the CPU's in double, closer still); dx's cancellation (dy − mean(dy)
// − x̂·mean(dy·x̂)) is what the normwise measure allows for.
#include <vector>

#include "dpt/autograd.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/batch_norm_checks.h"
#include "support/gpu.h"
#include "support/twins.h"

using namespace dpt;
using dpt_test::relative_diff;
using dpt_test::twin;
using dpt_test::Twin;
namespace checks = dpt_test::batch_norm_checks;

namespace {
constexpr double kTolerance = 1e-5;

dpt_test::kernel_checks::Side gpu_side() {
  return {cuda_kernels(0), Device::cuda(0), dpt_test::kernel_checks::Sizes::gpu};
}
}  // namespace

// ----------------------------------------------------------------------------
// the kernels

TEST_CASE("cuda batch_moments match the host path's mean and variance, offset columns included", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::moments_match_host(gpu_side());
}
TEST_CASE("cuda batch_norm normalizes like the host path and updates the running statistics", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::forward_matches_host(gpu_side());
}
TEST_CASE("cuda batch norm's backward sums and dx match the host path, over more rows than its own too", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::backward_matches_host(gpu_side());
}
TEST_CASE("cuda batch_norm_inference matches the host path, one row included", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::inference_matches_host(gpu_side());
}

// ----------------------------------------------------------------------------
// the op

TEST_CASE("batch_norm on cuda:0 matches cpu:0: output, running statistics, gradients, evaluation", "[gpu]") {
  DPT_REQUIRE_GPU();
  for (Shape shape : {Shape{2, 33}, Shape{512, 70}}) {  // two rows; 70 columns past two 32-column tiles
    INFO("x " << shape_str(shape));
    const int64_t cols = shape[1];
    Twin x = twin(shape, 1, 3.0f), w = twin({cols}, 2), b = twin({cols}, 3), r = twin(shape, 4);
    for (Tensor* t : {&x.cpu, &x.gpu, &w.cpu, &w.gpu, &b.cpu, &b.gpu}) t->set_requires_grad(true);
    BatchNormRunning run_cpu{Tensor::zeros({cols}, Device::cpu(0)), Tensor::full({cols}, 1.0f, Device::cpu(0))};
    BatchNormRunning run_gpu{Tensor::zeros({cols}, Device::cuda(0)), Tensor::full({cols}, 1.0f, Device::cuda(0))};
    Tensor y_cpu = batch_norm(x.cpu, w.cpu, b.cpu, 1e-5f, &run_cpu);
    Tensor y_gpu = batch_norm(x.gpu, w.gpu, b.gpu, 1e-5f, &run_gpu);
    REQUIRE(y_gpu.device().name() == "cuda:0");
    CHECK(relative_diff(y_gpu, y_cpu) <= kTolerance);
    CHECK(relative_diff(run_gpu.mean, run_cpu.mean) <= kTolerance);
    CHECK(relative_diff(run_gpu.var, run_cpu.var) <= kTolerance);
    backward(y_cpu, r.cpu);
    backward(y_gpu, r.gpu);
    CHECK(relative_diff(x.gpu.grad(), x.cpu.grad()) <= kTolerance);
    CHECK(relative_diff(w.gpu.grad(), w.cpu.grad()) <= kTolerance);
    CHECK(relative_diff(b.gpu.grad(), b.cpu.grad()) <= kTolerance);
    CHECK(relative_diff(batch_norm_inference(x.gpu, w.gpu, b.gpu, run_gpu),
                        batch_norm_inference(x.cpu, w.cpu, b.cpu, run_cpu)) <= kTolerance);
  }
}

TEST_CASE("batch_norm on cuda:0 refuses one row in training, as on the host, and evaluates one", "[gpu]") {
  DPT_REQUIRE_GPU();
  Twin x = twin({1, 3}, 5), w = twin({3}, 6), b = twin({3}, 7);
  CHECK_THROWS_WITH(batch_norm(x.gpu, w.gpu, b.gpu), contains_text("at least 2 rows"));
  BatchNormRunning running{Tensor::zeros({3}, Device::cuda(0)), Tensor::full({3}, 1.0f, Device::cuda(0))};
  BatchNormRunning on_cpu{Tensor::zeros({3}, Device::cpu(0)), Tensor::full({3}, 1.0f, Device::cpu(0))};
  CHECK(relative_diff(batch_norm_inference(x.gpu, w.gpu, b.gpu, running),
                      batch_norm_inference(x.cpu, w.cpu, b.cpu, on_cpu)) <= kTolerance);
}

TEST_CASE("batch_norm on cuda:0 refuses running statistics left on the host, naming both devices", "[gpu]") {
  DPT_REQUIRE_GPU();
  Twin x = twin({4, 3}, 8), w = twin({3}, 9), b = twin({3}, 10);
  BatchNormRunning on_cpu{Tensor::zeros({3}, Device::cpu(0)), Tensor::full({3}, 1.0f, Device::cpu(0))};
  CHECK_THROWS_WITH(batch_norm(x.gpu, w.gpu, b.gpu, 1e-5f, &on_cpu), contains_text("cuda:0") && contains_text("cpu:0"));
  CHECK_THROWS_WITH(batch_norm_inference(x.gpu, w.gpu, b.gpu, on_cpu), contains_text("running statistics on cpu:0"));
}
