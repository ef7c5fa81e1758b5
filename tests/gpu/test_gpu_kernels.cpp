// test_gpu_kernels.cpp — every function of the CUDA kernels (kernels.h on
// cuda:0) against its CPU twin on the same inputs. The CPU kernels are pinned
// against serial math in tests/core/test_kernels.cpp.
//
// Tolerances, argued once:
// - one IEEE operation per element (add, sub, mul, a copy, relu, a fill, a
//   bias add): both sides round the same exact result, so equal bit for bit;
// - a multiply feeding an add (axpy, optimizer updates): nvcc fuses it into
//   an FMA (one rounding), the CPU may not: ≤ a few ulp, so 1e-6 relative;
// - sums of n terms in another order (reductions, sum_rows): each side's
//   error is a random walk of roundings of its partial sums. The GPU's tree
//   keeps partials small; the CPU's Eigen sum runs a few vector lanes of n/16
//   terms each, ~√(n/16)·2⁻²⁴/√3 ≈ 1e-6 of Σ|x| for n = 10⁶ when every term is
//   positive (Σ x²): checked against 1e-5·Σ|x|. Signed terms (Σ x) keep the
//   partial sums near √n·|x|, so 1e-6·Σ|x| is already loose;
// - max |a − b| and argmax counts: exact (no rounding at all).
#include <cmath>
#include <limits>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "support/gemm_offsets.h"
#include "support/gpu.h"
#include "support/twins.h"

using namespace dpt;
using dpt_test::relative_diff;
using dpt_test::twin;
using dpt_test::Twin;

namespace {
constexpr int64_t kN = 100003;  // not a multiple of the block size, > one block
Kernels& cpu_side() { return cpu_kernels(); }
Kernels& gpu_side() { return cuda_kernels(0); }
Twin zeros_twin(const Shape& shape) {
  return {Tensor::zeros(shape, Device::cpu(0)), Tensor::zeros(shape, Device::cuda(0))};
}
double abs_sum(const Tensor& t) {
  double s = 0;
  for (float v : t.to_vector()) s += std::fabs(v);
  return s;
}
}  // namespace

TEST_CASE("kernels_for(cuda:0) is the CUDA kernels of GPU 0", "[gpu]") {
  DPT_REQUIRE_GPU();
  CHECK(&kernels_for(Device::cuda(0)) == &cuda_kernels(0));
  CHECK(&kernels_for(Device::cuda(0)) != &cpu_kernels());
}

TEST_CASE("cuda elementwise kernels equal their CPU twins bit for bit", "[gpu]") {
  DPT_REQUIRE_GPU();
  Twin a = twin({kN}, 1), b = twin({kN}, 2), out = zeros_twin({kN});
  auto same = [&](const char* what) {
    INFO(what);
    CHECK(relative_diff(out.gpu, out.cpu) == 0.0);
  };
  cpu_side().add(out.cpu.data(), a.cpu.data(), b.cpu.data(), kN);
  gpu_side().add(out.gpu.data(), a.gpu.data(), b.gpu.data(), kN);
  same("add");
  cpu_side().sub(out.cpu.data(), a.cpu.data(), b.cpu.data(), kN);
  gpu_side().sub(out.gpu.data(), a.gpu.data(), b.gpu.data(), kN);
  same("sub");
  cpu_side().mul(out.cpu.data(), a.cpu.data(), b.cpu.data(), kN);
  gpu_side().mul(out.gpu.data(), a.gpu.data(), b.gpu.data(), kN);
  same("mul");
  cpu_side().scaled_copy(out.cpu.data(), a.cpu.data(), 0.3f, kN);
  gpu_side().scaled_copy(out.gpu.data(), a.gpu.data(), 0.3f, kN);
  same("scaled_copy");
  cpu_side().scale(out.cpu.data(), -1.7f, kN);
  gpu_side().scale(out.gpu.data(), -1.7f, kN);
  same("scale");
  cpu_side().divide(out.cpu.data(), 3.0f, kN);
  gpu_side().divide(out.gpu.data(), 3.0f, kN);
  same("divide");
  cpu_side().relu(out.cpu.data(), a.cpu.data(), kN);
  gpu_side().relu(out.gpu.data(), a.gpu.data(), kN);
  same("relu");
  cpu_side().relu_backward(out.cpu.data(), a.cpu.data(), b.cpu.data(), kN);
  gpu_side().relu_backward(out.gpu.data(), a.gpu.data(), b.gpu.data(), kN);
  same("relu_backward");
  cpu_side().fill(out.cpu.data(), 2.5f, kN);
  gpu_side().fill(out.gpu.data(), 2.5f, kN);
  same("fill");
  Twin scalar = twin({}, 3);
  cpu_side().scale_by_scalar(out.cpu.data(), a.cpu.data(), scalar.cpu.data(), 2.0f, 7.0f, kN);
  gpu_side().scale_by_scalar(out.gpu.data(), a.gpu.data(), scalar.gpu.data(), 2.0f, 7.0f, kN);
  same("scale_by_scalar");
  cpu_side().fill_from_scalar(out.cpu.data(), scalar.cpu.data(), 1.0f, 3.0f, kN);
  gpu_side().fill_from_scalar(out.gpu.data(), scalar.gpu.data(), 1.0f, 3.0f, kN);
  same("fill_from_scalar");
  cpu_side().axpy(out.cpu.data(), 0.7f, b.cpu.data(), kN);
  gpu_side().axpy(out.gpu.data(), 0.7f, b.gpu.data(), kN);
  INFO("axpy (an FMA on the GPU)");
  CHECK(relative_diff(out.gpu, out.cpu) <= 1e-6);
}

TEST_CASE("cuda add_bias equals the CPU's, sum_rows matches it to summation order", "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t rows = 1000, cols = 301;
  Twin y = twin({rows, cols}, 4), bias = twin({cols}, 5), dbias = zeros_twin({cols});
  cpu_side().add_bias(y.cpu.data(), bias.cpu.data(), rows, cols);
  gpu_side().add_bias(y.gpu.data(), bias.gpu.data(), rows, cols);
  CHECK(relative_diff(y.gpu, y.cpu) == 0.0);
  cpu_side().sum_rows(dbias.cpu.data(), y.cpu.data(), rows, cols);
  gpu_side().sum_rows(dbias.gpu.data(), y.gpu.data(), rows, cols);
  // 1000 terms a column: rounding in another order is ~√1000·2⁻²⁴ ≈ 2e-6 of
  // the partial sums, which are of the size of the largest column sum.
  CHECK(relative_diff(dbias.gpu, dbias.cpu) <= 1e-5);
}

TEST_CASE("cuda sum and sum_squares match the CPU to summation order, also over a million elements", "[gpu]") {
  DPT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), kN, int64_t(1000003)}) {
    Twin x = twin({n}, 6), out = zeros_twin({});
    INFO(n << " elements");
    cpu_side().sum(out.cpu.data(), x.cpu.data(), n);
    gpu_side().sum(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(out.gpu.item() - out.cpu.item()) <= 1e-6 * abs_sum(x.cpu));
    cpu_side().sum_squares(out.cpu.data(), x.cpu.data(), n);
    gpu_side().sum_squares(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(out.gpu.item() - out.cpu.item()) <= 1e-5 * out.cpu.item());  // all terms ≥ 0
  }
}

TEST_CASE("cuda kernels over 0 elements write nothing, and their reductions give 0", "[gpu]") {
  DPT_REQUIRE_GPU();
  Twin x = twin({4}, 7), out = twin({}, 8);
  gpu_side().add(x.gpu.data(), x.gpu.data(), x.gpu.data(), 0);
  gpu_side().fill(x.gpu.data(), 9.0f, 0);
  CHECK(x.gpu.to_vector() == x.cpu.to_vector());
  gpu_side().sum(out.gpu.data(), x.gpu.data(), 0);
  CHECK(out.gpu.item() == 0.0f);
  CHECK(gpu_side().max_abs_diff(x.gpu.data(), x.gpu.data(), 0) == 0.0f);
}

TEST_CASE("cuda softmax-cross-entropy and its backward match the CPU's double-precision rows", "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t rows = 3000, classes = 10;  // several blocks of rows
  Twin logits = twin({rows, classes}, 9, 20.0f), probs = zeros_twin({rows, classes});
  Twin loss = zeros_twin({}), dlogits = zeros_twin({rows, classes}), dloss = twin({}, 10);
  std::vector<int64_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[std::size_t(i)] = (i * 7) % classes;
  cpu_side().softmax_cross_entropy(probs.cpu.data(), loss.cpu.data(), logits.cpu.data(), labels.data(), rows, classes);
  gpu_side().softmax_cross_entropy(probs.gpu.data(), loss.gpu.data(), logits.gpu.data(), labels.data(), rows, classes);
  // Same double math per row; only exp/log (≤ 1 ulp in double) and the order
  // of the row sum differ, both far below float rounding.
  CHECK(relative_diff(probs.gpu, probs.cpu) <= 1e-6);
  CHECK(relative_diff(loss.gpu, loss.cpu) <= 1e-6);
  cpu_side().softmax_cross_entropy_backward(dlogits.cpu.data(), probs.cpu.data(), labels.data(), dloss.cpu.data(), rows,
                                       classes);
  gpu_side().softmax_cross_entropy_backward(dlogits.gpu.data(), probs.gpu.data(), labels.data(), dloss.gpu.data(), rows,
                                       classes);
  CHECK(relative_diff(dlogits.gpu, dlogits.cpu) <= 1e-6);
}

TEST_CASE("cuda optimizer steps match the CPU's update rules to an ulp or two", "[gpu]") {
  DPT_REQUIRE_GPU();
  Twin p = twin({kN}, 11), m = twin({kN}, 12, 0.1f), v = twin({kN}, 13, 0.1f), g = twin({kN}, 14);
  // v must be ≥ 0: square it, the same way on both sides.
  cpu_side().mul(v.cpu.data(), v.cpu.data(), v.cpu.data(), kN);
  gpu_side().mul(v.gpu.data(), v.gpu.data(), v.gpu.data(), kN);
  cpu_side().sgd_step(p.cpu.data(), g.cpu.data(), 0.1f, 0.01f, kN);
  gpu_side().sgd_step(p.gpu.data(), g.gpu.data(), 0.1f, 0.01f, kN);
  CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  for (bool first : {true, false}) {
    cpu_side().momentum_step(p.cpu.data(), m.cpu.data(), g.cpu.data(), 0.1f, 0.9f, 0.01f, first, kN);
    gpu_side().momentum_step(p.gpu.data(), m.gpu.data(), g.gpu.data(), 0.1f, 0.9f, 0.01f, first, kN);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
  for (bool decoupled : {false, true}) {
    AdamStep s;
    s.lr = 0.01f;
    s.weight_decay = 0.1f;
    s.decoupled = decoupled;
    s.correction1 = 1.0f - std::pow(0.9f, 3.0f);
    s.correction2 = 1.0f - std::pow(0.999f, 3.0f);
    cpu_side().adam_step(p.cpu.data(), m.cpu.data(), v.cpu.data(), g.cpu.data(), s, kN);
    gpu_side().adam_step(p.gpu.data(), m.gpu.data(), v.gpu.data(), g.gpu.data(), s, kN);
    INFO("decoupled " << decoupled);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(v.gpu, v.cpu) <= 1e-6);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
}

TEST_CASE("cuda count_correct equals the CPU's count, ties and out-of-range labels included", "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t rows = 5000, classes = 7;
  Twin logits = twin({rows, classes}, 15);
  // Ties: every 10th row has all-equal logits (the first class wins).
  std::vector<float> values = logits.cpu.to_vector();
  for (int64_t i = 0; i < rows; i += 10)
    for (int64_t c = 0; c < classes; ++c) values[std::size_t(i * classes + c)] = 0.5f;
  logits.cpu = Tensor::from_vector({rows, classes}, values, Device::cpu(0));
  logits.gpu = logits.cpu.to(Device::cuda(0));
  std::vector<int64_t> labels(rows);
  for (int64_t i = 0; i < rows; ++i) labels[std::size_t(i)] = (i * 3) % (classes + 1);  // `classes` never matches
  int64_t expected = cpu_side().count_correct(logits.cpu.data(), labels.data(), rows, classes);
  REQUIRE(expected > 0);
  CHECK(gpu_side().count_correct(logits.gpu.data(), labels.data(), rows, classes) == expected);
}

TEST_CASE("cuda max_abs_diff equals the CPU's and reports a NaN in any block as NaN", "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t n = 1000003;
  Twin a = twin({n}, 16), b = twin({n}, 17);
  float expected = cpu_side().max_abs_diff(a.cpu.data(), b.cpu.data(), n);
  CHECK(gpu_side().max_abs_diff(a.gpu.data(), b.gpu.data(), n) == expected);
  for (int64_t where : {int64_t(0), n / 2, n - 1}) {  // first block, a middle one, the grid-stride tail
    std::vector<float> values = a.cpu.to_vector();
    values[std::size_t(where)] = std::numeric_limits<float>::quiet_NaN();
    Tensor with_nan = Tensor::from_vector({n}, values, Device::cuda(0));
    INFO("NaN at " << where);
    CHECK(std::isnan(gpu_side().max_abs_diff(with_nan.data(), b.gpu.data(), n)));
    CHECK(std::isnan(gpu_side().max_abs_diff(b.gpu.data(), with_nan.data(), n)));
  }
}

TEST_CASE("cuda gemm gives the same bits wherever its operands start (views at 4 to 64 bytes in)", "[gpu]") {
  // cuBLAS chooses its kernel by alignment too; dpt stages an operand off a
  // 256-byte boundary through an aligned copy, so ch07's viewed and gathered
  // layers compute the same bits (support/gemm_offsets.h).
  DPT_REQUIRE_GPU();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose a " << ta << ", transpose b " << tb);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 33, 65, 129, 0.0f) == 0);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 256, 1024, 784, 0.5f) == 0);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 4096, 10, 1024, 0.0f) == 0);
    }
}
