// test_gpu_kernels.cpp — every function of the CUDA kernels (kernels.h on
// cuda:0) against its CPU twin on the same inputs. The CPU kernels are pinned
// against serial math in tests/core/test_kernels.cpp.
//
// Tolerances, argued once:
// - one IEEE operation per element (add, sub, mul, a copy, relu, a fill, a
//   bias add): both sides round the same exact result, so equal bit for bit;
// - a multiply feeding an add (axpy, optimizer updates): nvcc fuses it into
//   an FMA (one rounding), the CPU may not: ≤ a few ulp, so 1e-6 relative;
// - sums of n terms (reductions, sum_rows): CPU and GPU each against a
//   double-precision serial sum, within float_sum_error_bound below, which
//   holds in any summation order (Eigen's lane count, the GPU's tree), times
//   Σ|terms|. Small integers sum exactly in any order: there both must equal
//   the oracle bit for bit, which catches a dropped or doubled term that no
//   rounding bound can. Σ x against the CPU stays at 1e-6·Σ|x|: signed
//   terms uniform in [-1, 1] keep the k-th partial sum near √(k/3), so the n
//   roundings add up (a random walk) to ~2⁻²⁴·n/4 even in serial order, the
//   worst, a thirtieth of 1e-6·Σ|x| = 1e-6·n/2;
// - max |a − b| and argmax counts: exact (no rounding at all).
#include <algorithm>
#include <cmath>
#include <cstring>
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

// How far a float sum may be from the exact one, as a multiple of Σ|terms|,
// when each term passes through at most k roundings (n terms summed: k = n − 1
// additions, in whatever order; Σ x²: k = n, the square too), each a factor
// (1 + δ) with |δ| ≤ u = 2⁻²⁴:
// - worst case: γ(k) = k·u / (1 − k·u) (Higham, Accuracy and Stability of
//   Numerical Algorithms, §4.2), growing like k;
// - δ independent with mean zero (Higham & Mary, SIAM J. Sci. Comput. 41(5),
//   2019, Thm 3.1): exp(λ·√k·u + k·u²/(1 − u)) − 1 ≈ λ·√k·u, exceeded with
//   probability ≤ 2k·exp(−λ²(1 − u)²/2); λ = 8: < 3e-8 for k = 10⁶.
// Both hold, so the smaller does (the worst case below k = λ² = 64); plus the
// double oracle's own worst case, k·2⁻⁵³.
double float_sum_error_bound(int64_t roundings) {
  const double u = std::ldexp(1.0, -24), k = double(roundings), lambda = 8.0;
  double worst = k * u < 1 ? k * u / (1 - k * u) : std::numeric_limits<double>::infinity();
  double probable = std::expm1(lambda * std::sqrt(k) * u + k * u * u / (1 - u));
  return std::min(worst, probable) + k * std::ldexp(1.0, -53);
}

// Same bits (NaN, −0 included), not just equal values.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
// (rows, cols) small integers in [-2, 2]: every partial sum of a column (of
// squares, for one column) is an integer of at most 4·rows, exact in float
// whatever the order while that stays below 2²⁴ (rows ≤ 4·10⁶).
std::vector<float> small_integers(int64_t rows, int64_t cols) {
  std::vector<float> values(std::size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) values[std::size_t(r * cols + c)] = float((r * 7 + c * 3) % 5 - 2);
  return values;
}
// Column sums of dy (rows, cols) in double, serially, and Σ|dy| per column.
void column_sums(const std::vector<float>& dy, int64_t rows, int64_t cols, std::vector<double>& sums,
                 std::vector<double>& abs_sums) {
  sums.assign(std::size_t(cols), 0.0), abs_sums.assign(std::size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      sums[std::size_t(c)] += dy[std::size_t(r * cols + c)];
      abs_sums[std::size_t(c)] += std::fabs(dy[std::size_t(r * cols + c)]);
    }
}
// Columns of `got` farther from the oracle than bound · Σ|dy| of the column.
int64_t columns_off(const std::vector<float>& got, const std::vector<double>& sums,
                    const std::vector<double>& abs_sums, double bound) {
  int64_t off = 0;
  for (std::size_t c = 0; c < got.size(); ++c)
    if (!(std::fabs(double(got[c]) - sums[c]) <= bound * abs_sums[c])) ++off;  // a NaN is off too
  return off;
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

TEST_CASE("cuda sum_rows matches a double column sum within float rounding, and small integers exactly", "[gpu]") {
  DPT_REQUIRE_GPU();
  // Rows: none, one pass (under 128), a few chunks, many (4097 ends in a
  // 2-row chunk, 40000 has 625 rows a chunk); cols: under, over and many
  // 32-column tiles.
  for (int64_t rows : {0, 1, 7, 255, 256, 4097, 40000})
    for (int64_t cols : {1, 10, 33, 1024}) {
      INFO(rows << " x " << cols);
      std::vector<double> sums, abs_sums;
      const double bound = float_sum_error_bound(std::max<int64_t>(rows - 1, 0));  // rows − 1 additions a column
      Twin dy = twin({rows, cols}, 18), dbias = zeros_twin({cols});
      column_sums(dy.cpu.to_vector(), rows, cols, sums, abs_sums);
      cpu_side().sum_rows(dbias.cpu.data(), dy.cpu.data(), rows, cols);
      gpu_side().sum_rows(dbias.gpu.data(), dy.gpu.data(), rows, cols);
      CHECK(columns_off(dbias.cpu.to_vector(), sums, abs_sums, bound) == 0);
      CHECK(columns_off(dbias.gpu.to_vector(), sums, abs_sums, bound) == 0);

      std::vector<float> integers = small_integers(rows, cols);
      column_sums(integers, rows, cols, sums, abs_sums);
      Tensor exact_dy = Tensor::from_vector({rows, cols}, integers, Device::cuda(0));
      gpu_side().sum_rows(dbias.gpu.data(), exact_dy.data(), rows, cols);
      CHECK(columns_off(dbias.gpu.to_vector(), sums, abs_sums, 0.0) == 0);  // exact, every column
    }
}

TEST_CASE("cuda sum_rows gives the same bits on every call, after other shapes and inside a CUDA graph", "[gpu]") {
  // Chapter 07 compares ZeRO stages bit for bit: the column sums' order must
  // depend on the shape alone, never on timing, scratch or stream.
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  for (Shape shape : {Shape{4097, 33}, Shape{40000, 10}, Shape{256, 1024}, Shape{7, 10}}) {
    const int64_t rows = shape[0], cols = shape[1];
    INFO(rows << " x " << cols);
    Tensor dy = twin(shape, 19).gpu, dbias = Tensor::zeros({cols}, gpu0);
    gpu_side().sum_rows(dbias.data(), dy.data(), rows, cols);
    const std::vector<float> first = dbias.to_vector();
    gpu_side().sum_rows(dbias.data(), dy.data(), rows, cols);
    CHECK(same_bits(dbias.to_vector(), first));

    Tensor wide = Tensor::zeros({4096, 4096}, gpu0), wide_sums = Tensor::zeros({4096}, gpu0);
    gpu_side().sum_rows(wide_sums.data(), wide.data(), 4096, 4096);  // grows the scratch in between
    gpu_side().sum_rows(dbias.data(), dy.data(), rows, cols);
    CHECK(same_bits(dbias.to_vector(), first));

    // Captured on a side stream while the last eager call ran on this
    // thread's own: the capture must order itself after that call without
    // failing, and every replay must write the eager bits.
    gpu::Stream side(0);
    Tensor replayed = Tensor::zeros({cols}, gpu0);
    gpu::current_stream(0).synchronize();  // its zeros are written before the side stream's replay
    gpu::Graph graph;
    {
      gpu::StreamGuard on_side(side);
      graph.capture(side, [&] { gpu_side().sum_rows(replayed.data(), dy.data(), rows, cols); });
      graph.replay(side);
      side.synchronize();
    }
    CHECK(same_bits(replayed.to_vector(), first));
  }
}

TEST_CASE("cuda sum and sum_squares match the CPU to summation order, also over a million elements", "[gpu]") {
  DPT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), kN, int64_t(1000003)}) {
    Twin x = twin({n}, 6), out = zeros_twin({});
    INFO(n << " elements");
    cpu_side().sum(out.cpu.data(), x.cpu.data(), n);
    gpu_side().sum(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(out.gpu.item() - out.cpu.item()) <= 1e-6 * abs_sum(x.cpu));
    // Σ x² against double: each x² is exact in double, all terms are ≥ 0
    // (Σ|terms| is the sum itself), and each term sees n roundings at most.
    double exact = 0;
    for (float v : x.cpu.to_vector()) exact += double(v) * double(v);
    double tolerance = float_sum_error_bound(n) * exact;
    cpu_side().sum_squares(out.cpu.data(), x.cpu.data(), n);
    gpu_side().sum_squares(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(double(out.cpu.item()) - exact) <= tolerance);
    CHECK(std::fabs(double(out.gpu.item()) - exact) <= tolerance);
  }
}

TEST_CASE("cuda sum and sum_squares of small integers are exact, so no element is dropped or counted twice",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  for (int64_t n : {int64_t(1), int64_t(257), kN, int64_t(1000003)}) {
    // Values in [-2, 2]: |Σ x| ≤ Σ x² ≤ 4n < 2²⁴, every partial sum exact.
    std::vector<float> values = small_integers(n, 1);
    double exact = 0, exact_squares = 0;
    for (float v : values) exact += v, exact_squares += double(v) * v;
    Tensor x = Tensor::from_vector({n}, values, Device::cuda(0)), out = Tensor::zeros({}, Device::cuda(0));
    INFO(n << " elements");
    gpu_side().sum(out.data(), x.data(), n);
    CHECK(double(out.item()) == exact);
    gpu_side().sum_squares(out.data(), x.data(), n);
    CHECK(double(out.item()) == exact_squares);
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
