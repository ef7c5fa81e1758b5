// kernel_checks.h — the specs of the GPU kernels (kernels.h), written once and
// run twice: on cuda:0 by tests/gpu/test_gpu_kernels.cpp, and on the CPU
// emulator, the same kernel code thread by thread, by
// tests/core/test_kernels_emulated.cpp. Each check holds the side under test
// to its CPU twin (cpu_kernels(), pinned against serial math in
// tests/core/test_kernels.cpp) or to a serial double-precision oracle.
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
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/tensor.h"
#include "support/catch.h"
#include "support/twins.h"

namespace dpt_test::kernel_checks {

/// Entries whose bits differ (a size mismatch counts one more); INFO names the first.
inline int64_t bits_off(const std::vector<float>& got, const std::vector<float>& want) {
  int64_t count = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (count++ == 0) UNSCOPED_INFO("first at " << i << ": " << got[i] << " against " << want[i]);
    }
  return got.size() == want.size() ? count : count + 1;
}

/// How big the inputs are: what a GPU does in milliseconds; what the
/// emulator on fibers does in a second or two (grid-stride loops still wrap);
/// what it does on threads (under the sanitizers), where every barrier wakes
/// 256 threads.
enum class Sizes { gpu, medium, small };

/// The kernels under test, the device their tensors live on, and how big.
struct Side {
  dpt::Kernels& kernels;  ///< cuda_kernels(0), or the emulated CUDA kernels
  dpt::Device& device;    ///< cuda:0, or a CPU device for the emulator
  Sizes sizes;
};

/// The value for side's sizes.
template <typename T>
T pick(const Side& side, T gpu, T medium, T small) {
  return side.sizes == Sizes::gpu ? gpu : side.sizes == Sizes::medium ? medium : small;
}

// ----------------------------------------------------------------------------
// oracles

/// How far a float sum may be from the exact one, as a multiple of Σ|terms|,
/// when each term passes through at most k roundings (n terms summed: k = n − 1
/// additions, in whatever order; Σ x²: k = n, the square too), each a factor
/// (1 + δ) with |δ| ≤ u = 2⁻²⁴:
/// - worst case: γ(k) = k·u / (1 − k·u) (Higham, Accuracy and Stability of
///   Numerical Algorithms, §4.2), growing like k;
/// - δ independent with mean zero (Higham & Mary, SIAM J. Sci. Comput. 41(5),
///   2019, Thm 3.1): exp(λ·√k·u + k·u²/(1 − u)) − 1 ≈ λ·√k·u, exceeded with
///   probability ≤ 2k·exp(−λ²(1 − u)²/2); λ = 8: < 3e-8 for k = 10⁶.
/// Both hold, so the smaller does (the worst case below k = λ² = 64); plus the
/// double oracle's own worst case, k·2⁻⁵³.
inline double float_sum_error_bound(int64_t roundings) {
  const double u = std::ldexp(1.0, -24), k = double(roundings), lambda = 8.0;
  double worst = k * u < 1 ? k * u / (1 - k * u) : std::numeric_limits<double>::infinity();
  double probable = std::expm1(lambda * std::sqrt(k) * u + k * u * u / (1 - u));
  return std::min(worst, probable) + k * std::ldexp(1.0, -53);
}

/// Same bits (NaN, −0 included), not just equal values.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
/// (rows, cols) small integers in [-2, 2]: every partial sum of a column (of
/// squares, for one column) is an integer of at most 4·rows, exact in float
/// whatever the order while that stays below 2²⁴ (rows ≤ 4·10⁶).
inline std::vector<float> small_integers(int64_t rows, int64_t cols) {
  std::vector<float> values(std::size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) values[std::size_t(r * cols + c)] = float((r * 7 + c * 3) % 5 - 2);
  return values;
}
/// Column sums of dy (rows, cols) in double, serially, and Σ|dy| per column.
inline void column_sums(const std::vector<float>& dy, int64_t rows, int64_t cols, std::vector<double>& sums,
                        std::vector<double>& abs_sums) {
  sums.assign(std::size_t(cols), 0.0), abs_sums.assign(std::size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      sums[std::size_t(c)] += dy[std::size_t(r * cols + c)];
      abs_sums[std::size_t(c)] += std::fabs(dy[std::size_t(r * cols + c)]);
    }
}
/// Columns of `got` farther from the oracle than bound · Σ|dy| of the column.
inline int64_t columns_off(const std::vector<float>& got, const std::vector<double>& sums,
                           const std::vector<double>& abs_sums, double bound) {
  int64_t off = 0;
  for (std::size_t c = 0; c < got.size(); ++c)
    if (!(std::fabs(double(got[c]) - sums[c]) <= bound * abs_sums[c])) ++off;  // a NaN is off too
  return off;
}
inline double abs_sum(const dpt::Tensor& t) {
  double s = 0;
  for (float v : t.to_vector()) s += std::fabs(v);
  return s;
}

// ----------------------------------------------------------------------------
// the checks (Catch2 assertions inside; call from a TEST_CASE)

namespace detail {
inline dpt::Kernels& cpu() { return dpt::cpu_kernels(); }
/// Not a multiple of the block size, more than one block.
inline int64_t elements(const Side& side) { return side.sizes == Sizes::small ? 1001 : 100003; }
inline Twin zeros_twin(const Side& side, const dpt::Shape& shape) {
  return {dpt::Tensor::zeros(shape, dpt::Device::cpu(0)), dpt::Tensor::zeros(shape, side.device)};
}
inline Twin twin_on(const Side& side, const dpt::Shape& shape, uint64_t seed, float scale = 1.0f) {
  return twin(shape, seed, scale, side.device);
}
}  // namespace detail

/// Elementwise kernels equal their CPU twins bit for bit (axpy: to an FMA).
inline void elementwise_match_cpu(const Side& side) {
  using namespace detail;
  const int64_t n = elements(side);
  dpt::Kernels& k = side.kernels;
  Twin a = twin_on(side, {n}, 1), b = twin_on(side, {n}, 2), out = zeros_twin(side, {n});
  auto same = [&](const char* what) {
    INFO(what);
    CHECK(relative_diff(out.gpu, out.cpu) == 0.0);
  };
  cpu().add(out.cpu.data(), a.cpu.data(), b.cpu.data(), n);
  k.add(out.gpu.data(), a.gpu.data(), b.gpu.data(), n);
  same("add");
  cpu().sub(out.cpu.data(), a.cpu.data(), b.cpu.data(), n);
  k.sub(out.gpu.data(), a.gpu.data(), b.gpu.data(), n);
  same("sub");
  cpu().mul(out.cpu.data(), a.cpu.data(), b.cpu.data(), n);
  k.mul(out.gpu.data(), a.gpu.data(), b.gpu.data(), n);
  same("mul");
  cpu().scaled_copy(out.cpu.data(), a.cpu.data(), 0.3f, n);
  k.scaled_copy(out.gpu.data(), a.gpu.data(), 0.3f, n);
  same("scaled_copy");
  cpu().scale(out.cpu.data(), -1.7f, n);
  k.scale(out.gpu.data(), -1.7f, n);
  same("scale");
  cpu().divide(out.cpu.data(), 3.0f, n);
  k.divide(out.gpu.data(), 3.0f, n);
  same("divide");
  cpu().relu(out.cpu.data(), a.cpu.data(), n);
  k.relu(out.gpu.data(), a.gpu.data(), n);
  same("relu");
  cpu().relu_backward(out.cpu.data(), a.cpu.data(), b.cpu.data(), n);
  k.relu_backward(out.gpu.data(), a.gpu.data(), b.gpu.data(), n);
  same("relu_backward");
  cpu().fill(out.cpu.data(), 2.5f, n);
  k.fill(out.gpu.data(), 2.5f, n);
  same("fill");
  Twin scalar = twin_on(side, {}, 3);
  cpu().scale_by_scalar(out.cpu.data(), a.cpu.data(), scalar.cpu.data(), 2.0f, 7.0f, n);
  k.scale_by_scalar(out.gpu.data(), a.gpu.data(), scalar.gpu.data(), 2.0f, 7.0f, n);
  same("scale_by_scalar");
  cpu().fill_from_scalar(out.cpu.data(), scalar.cpu.data(), 1.0f, 3.0f, n);
  k.fill_from_scalar(out.gpu.data(), scalar.gpu.data(), 1.0f, 3.0f, n);
  same("fill_from_scalar");
  cpu().axpy(out.cpu.data(), 0.7f, b.cpu.data(), n);
  k.axpy(out.gpu.data(), 0.7f, b.gpu.data(), n);
  INFO("axpy (an FMA on the GPU)");
  CHECK(relative_diff(out.gpu, out.cpu) <= 1e-6);
}

/// add_bias equals the CPU's bit for bit; sum_rows matches it to summation order.
inline void bias_match_cpu(const Side& side) {
  using namespace detail;
  const int64_t rows = pick<int64_t>(side, 1000, 1000, 300), cols = pick<int64_t>(side, 301, 301, 45);
  Twin y = twin_on(side, {rows, cols}, 4), bias = twin_on(side, {cols}, 5), dbias = zeros_twin(side, {cols});
  cpu().add_bias(y.cpu.data(), bias.cpu.data(), rows, cols);
  side.kernels.add_bias(y.gpu.data(), bias.gpu.data(), rows, cols);
  CHECK(relative_diff(y.gpu, y.cpu) == 0.0);
  cpu().sum_rows(dbias.cpu.data(), y.cpu.data(), rows, cols);
  side.kernels.sum_rows(dbias.gpu.data(), y.gpu.data(), rows, cols);
  // 1000 terms a column: rounding in another order is ~√1000·2⁻²⁴ ≈ 2e-6 of
  // the partial sums, which are of the size of the largest column sum.
  CHECK(relative_diff(dbias.gpu, dbias.cpu) <= 1e-5);
}

/// sum_rows against a double column sum within float rounding, small integers exactly.
inline void sum_rows_match_oracle(const Side& side) {
  using namespace detail;
  // Rows: none, one pass (under 128), a few chunks, many (4097 ends in a
  // 2-row chunk, 40000 has 625 rows a chunk); cols: under, over and many
  // 32-column tiles.
  using Counts = std::vector<int64_t>;
  Counts row_counts = pick<Counts>(side, {0, 1, 7, 255, 256, 4097, 40000}, {0, 1, 7, 127, 128, 255, 4097, 40000},
                                   {0, 7, 128, 301});  // 301: chunks of unequal size
  Counts col_counts = pick<Counts>(side, {1, 10, 33, 1024}, {1, 10, 33, 100}, {10, 33});
  for (int64_t rows : row_counts)
    for (int64_t cols : col_counts) {
      INFO(rows << " x " << cols);
      std::vector<double> sums, abs_sums;
      const double bound = float_sum_error_bound(std::max<int64_t>(rows - 1, 0));  // rows − 1 additions a column
      Twin dy = twin_on(side, {rows, cols}, 18), dbias = zeros_twin(side, {cols});
      column_sums(dy.cpu.to_vector(), rows, cols, sums, abs_sums);
      cpu().sum_rows(dbias.cpu.data(), dy.cpu.data(), rows, cols);
      side.kernels.sum_rows(dbias.gpu.data(), dy.gpu.data(), rows, cols);
      CHECK(columns_off(dbias.cpu.to_vector(), sums, abs_sums, bound) == 0);
      CHECK(columns_off(dbias.gpu.to_vector(), sums, abs_sums, bound) == 0);

      std::vector<float> integers = small_integers(rows, cols);
      column_sums(integers, rows, cols, sums, abs_sums);
      dpt::Tensor exact_dy = dpt::Tensor::from_vector({rows, cols}, integers, side.device);
      side.kernels.sum_rows(dbias.gpu.data(), exact_dy.data(), rows, cols);
      CHECK(columns_off(dbias.gpu.to_vector(), sums, abs_sums, 0.0) == 0);  // exact, every column
    }
}

/// sum_rows gives the same bits on every call for a shape, also after other
/// shapes (ch07 compares ZeRO stages bit for bit: the order must depend on the
/// shape alone).
inline void sum_rows_same_bits(const Side& side) {
  using Shapes = std::vector<dpt::Shape>;
  Shapes shapes = pick<Shapes>(side, {{4097, 33}, {40000, 10}, {256, 1024}, {7, 10}},
                               {{4097, 33}, {40000, 10}, {256, 100}, {7, 10}}, {{301, 33}, {7, 10}});
  const int64_t wide = pick<int64_t>(side, 4096, 512, 200);
  for (const dpt::Shape& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1];
    INFO(rows << " x " << cols);
    dpt::Tensor dy = twin(shape, 19, 1.0f, side.device).gpu, dbias = dpt::Tensor::zeros({cols}, side.device);
    side.kernels.sum_rows(dbias.data(), dy.data(), rows, cols);
    const std::vector<float> first = dbias.to_vector();
    side.kernels.sum_rows(dbias.data(), dy.data(), rows, cols);
    CHECK(same_bits(dbias.to_vector(), first));
    dpt::Tensor big = dpt::Tensor::zeros({wide, wide}, side.device), big_sums = dpt::Tensor::zeros({wide}, side.device);
    side.kernels.sum_rows(big_sums.data(), big.data(), wide, wide);  // on a GPU: grows the scratch in between
    side.kernels.sum_rows(dbias.data(), dy.data(), rows, cols);
    CHECK(same_bits(dbias.to_vector(), first));
  }
}

/// sum and sum_squares match the CPU to summation order, Σ x² the double oracle.
inline void sums_match_cpu(const Side& side) {
  using namespace detail;
  // 1000003 and 300007: more than the first pass has threads (1024 blocks ×
  // 256), so its grid-stride loop wraps.
  using Counts = std::vector<int64_t>;
  Counts sizes = pick<Counts>(side, {1, 255, 257, 100003, 1000003}, {1, 255, 257, 100003, 300007}, {1, 255, 257, 3001});
  for (int64_t n : sizes) {
    Twin x = twin_on(side, {n}, 6), out = zeros_twin(side, {});
    INFO(n << " elements");
    cpu().sum(out.cpu.data(), x.cpu.data(), n);
    side.kernels.sum(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(out.gpu.item() - out.cpu.item()) <= 1e-6 * abs_sum(x.cpu));
    // Σ x² against double: each x² is exact in double, all terms are ≥ 0
    // (Σ|terms| is the sum itself), and each term sees n roundings at most.
    double exact = 0;
    for (float v : x.cpu.to_vector()) exact += double(v) * double(v);
    double tolerance = float_sum_error_bound(n) * exact;
    cpu().sum_squares(out.cpu.data(), x.cpu.data(), n);
    side.kernels.sum_squares(out.gpu.data(), x.gpu.data(), n);
    CHECK(std::fabs(double(out.cpu.item()) - exact) <= tolerance);
    CHECK(std::fabs(double(out.gpu.item()) - exact) <= tolerance);
  }
}

/// sum and sum_squares of small integers are exact: no element dropped or counted twice.
inline void integer_sums_exact(const Side& side) {
  using Counts = std::vector<int64_t>;
  Counts sizes = pick<Counts>(side, {1, 257, 100003, 1000003}, {1, 257, 100003, 300007}, {1, 257, 3001});
  for (int64_t n : sizes) {
    // Values in [-2, 2]: |Σ x| ≤ Σ x² ≤ 4n < 2²⁴, every partial sum exact.
    std::vector<float> values = small_integers(n, 1);
    double exact = 0, exact_squares = 0;
    for (float v : values) exact += v, exact_squares += double(v) * v;
    dpt::Tensor x = dpt::Tensor::from_vector({n}, values, side.device), out = dpt::Tensor::zeros({}, side.device);
    INFO(n << " elements");
    side.kernels.sum(out.data(), x.data(), n);
    CHECK(double(out.item()) == exact);
    side.kernels.sum_squares(out.data(), x.data(), n);
    CHECK(double(out.item()) == exact_squares);
  }
}

/// Over 0 elements: nothing written, reductions give 0.
inline void empty_inputs(const Side& side) {
  using namespace detail;
  Twin x = twin_on(side, {4}, 7), out = twin_on(side, {}, 8);
  side.kernels.add(x.gpu.data(), x.gpu.data(), x.gpu.data(), 0);
  side.kernels.fill(x.gpu.data(), 9.0f, 0);
  CHECK(x.gpu.to_vector() == x.cpu.to_vector());
  side.kernels.sum(out.gpu.data(), x.gpu.data(), 0);
  CHECK(out.gpu.item() == 0.0f);
  CHECK(side.kernels.max_abs_diff(x.gpu.data(), x.gpu.data(), 0) == 0.0f);
}

/// Softmax-cross-entropy and its backward match the CPU's double-precision rows.
inline void softmax_cross_entropy_match_cpu(const Side& side) {
  using namespace detail;
  const int64_t rows = pick<int64_t>(side, 3000, 3000, 600), classes = 10;  // several blocks of rows
  Twin logits = twin_on(side, {rows, classes}, 9, 20.0f), probs = zeros_twin(side, {rows, classes});
  Twin loss = zeros_twin(side, {}), dlogits = zeros_twin(side, {rows, classes}), dloss = twin_on(side, {}, 10);
  std::vector<int64_t> labels(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) labels[std::size_t(i)] = (i * 7) % classes;
  cpu().softmax_cross_entropy(probs.cpu.data(), loss.cpu.data(), logits.cpu.data(), labels.data(), rows, classes);
  side.kernels.softmax_cross_entropy(probs.gpu.data(), loss.gpu.data(), logits.gpu.data(), labels.data(), rows,
                                     classes);
  // Same double math per row; only exp/log (≤ 1 ulp in double) and the order
  // of the row sum differ, both far below float rounding.
  CHECK(relative_diff(probs.gpu, probs.cpu) <= 1e-6);
  CHECK(relative_diff(loss.gpu, loss.cpu) <= 1e-6);
  cpu().softmax_cross_entropy_backward(dlogits.cpu.data(), probs.cpu.data(), labels.data(), dloss.cpu.data(), rows,
                                       classes);
  side.kernels.softmax_cross_entropy_backward(dlogits.gpu.data(), probs.gpu.data(), labels.data(), dloss.gpu.data(),
                                              rows, classes);
  CHECK(relative_diff(dlogits.gpu, dlogits.cpu) <= 1e-6);
}

/// SGD, momentum, Adam and AdamW steps match the CPU's update rules to an ulp or two.
inline void optimizers_match_cpu(const Side& side) {
  using namespace detail;
  const int64_t n = elements(side);
  dpt::Kernels& k = side.kernels;
  Twin p = twin_on(side, {n}, 11), m = twin_on(side, {n}, 12, 0.1f), v = twin_on(side, {n}, 13, 0.1f),
       g = twin_on(side, {n}, 14);
  // v must be ≥ 0: square it, the same way on both sides.
  cpu().mul(v.cpu.data(), v.cpu.data(), v.cpu.data(), n);
  k.mul(v.gpu.data(), v.gpu.data(), v.gpu.data(), n);
  cpu().sgd_step(p.cpu.data(), g.cpu.data(), 0.1f, 0.01f, n);
  k.sgd_step(p.gpu.data(), g.gpu.data(), 0.1f, 0.01f, n);
  CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  for (bool first : {true, false}) {
    cpu().momentum_step(p.cpu.data(), m.cpu.data(), g.cpu.data(), 0.1f, 0.9f, 0.01f, first, n);
    k.momentum_step(p.gpu.data(), m.gpu.data(), g.gpu.data(), 0.1f, 0.9f, 0.01f, first, n);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
  for (bool decoupled : {false, true}) {
    dpt::AdamStep s;
    s.lr = 0.01f;
    s.weight_decay = 0.1f;
    s.decoupled = decoupled;
    s.correction1 = 1.0f - std::pow(0.9f, 3.0f);
    s.correction2 = 1.0f - std::pow(0.999f, 3.0f);
    cpu().adam_step(p.cpu.data(), m.cpu.data(), v.cpu.data(), g.cpu.data(), s, n);
    k.adam_step(p.gpu.data(), m.gpu.data(), v.gpu.data(), g.gpu.data(), s, n);
    INFO("decoupled " << decoupled);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(v.gpu, v.cpu) <= 1e-6);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
}

/// LARS's and LAMB's layer kernels match the CPU's to an ulp or two, given the
/// same squared norms (a layer's, and the zero norms where the ratio is 1).
inline void layerwise_optimizers_match_cpu(const Side& side) {
  using namespace detail;
  const int64_t n = elements(side);
  dpt::Kernels& k = side.kernels;
  Twin p = twin_on(side, {n}, 21), m = twin_on(side, {n}, 22, 0.1f), v = zeros_twin(side, {n}),
       g = twin_on(side, {n}, 23), u = zeros_twin(side, {n}), squares = zeros_twin(side, {2});
  auto set_squares = [&](float p_squares, float other_squares) {
    squares.cpu = dpt::Tensor::from_vector({2}, {p_squares, other_squares}, dpt::Device::cpu(0));
    squares.gpu = squares.cpu.to(side.device);
  };
  const dpt::LarsStep lars{2.0f, 0.9f, 0.1f, 0.02f, 1e-8f};
  // A layer's norms, then each zero norm (ratio 1).
  using Norms = std::tuple<bool, float, float>;
  for (auto [first, ps, gs] : {Norms{true, 300.0f, 200.0f}, Norms{false, 0.0f, 200.0f}, Norms{false, 300.0f, 0.0f}}) {
    set_squares(ps, gs);
    cpu().lars_step(p.cpu.data(), m.cpu.data(), g.cpu.data(), squares.cpu.data(), lars, first, n);
    k.lars_step(p.gpu.data(), m.gpu.data(), g.gpu.data(), squares.gpu.data(), lars, first, n);
    INFO("lars_step, squares " << ps << ", " << gs);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
  dpt::AdamStep s;
  s.weight_decay = 0.1f;
  s.eps = 1e-6f;
  for (int t : {1, 2}) {
    s.at_step(t);
    cpu().lamb_direction(u.cpu.data(), m.cpu.data(), v.cpu.data(), p.cpu.data(), g.cpu.data(), s, n);
    k.lamb_direction(u.gpu.data(), m.gpu.data(), v.gpu.data(), p.gpu.data(), g.gpu.data(), s, n);
    INFO("lamb_direction, step " << t);
    CHECK(relative_diff(m.gpu, m.cpu) <= 1e-6);
    CHECK(relative_diff(v.gpu, v.cpu) <= 1e-6);
    CHECK(relative_diff(u.gpu, u.cpu) <= 1e-6);
  }
  using Squares = std::pair<float, float>;
  for (auto [ps, us] : {Squares{300.0f, 50.0f}, Squares{0.0f, 50.0f}, Squares{300.0f, 0.0f}}) {
    set_squares(ps, us);
    cpu().lamb_apply(p.cpu.data(), u.cpu.data(), squares.cpu.data(), 0.01f, n);
    k.lamb_apply(p.gpu.data(), u.gpu.data(), squares.gpu.data(), 0.01f, n);
    INFO("lamb_apply, squares " << ps << ", " << us);
    CHECK(relative_diff(p.gpu, p.cpu) <= 1e-6);
  }
}

/// count_correct equals the CPU's count/// count_correct equals the CPU's count, ties and out-of-range labels included.
inline void count_correct_matches_cpu(const Side& side) {
  using namespace detail;
  const int64_t rows = pick<int64_t>(side, 5000, 5000, 600), classes = 7;
  Twin logits = twin_on(side, {rows, classes}, 15);
  // Ties: every 10th row has all-equal logits (the first class wins).
  std::vector<float> values = logits.cpu.to_vector();
  for (int64_t i = 0; i < rows; i += 10)
    for (int64_t c = 0; c < classes; ++c) values[std::size_t(i * classes + c)] = 0.5f;
  logits.cpu = dpt::Tensor::from_vector({rows, classes}, values, dpt::Device::cpu(0));
  logits.gpu = logits.cpu.to(side.device);
  std::vector<int64_t> labels(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) labels[std::size_t(i)] = (i * 3) % (classes + 1);  // `classes` never matches
  int64_t expected = cpu().count_correct(logits.cpu.data(), labels.data(), rows, classes);
  REQUIRE(expected > 0);
  CHECK(side.kernels.count_correct(logits.gpu.data(), labels.data(), rows, classes) == expected);
}

/// max_abs_diff equals the CPU's and reports a NaN in any block as NaN.
inline void max_abs_diff_matches_cpu(const Side& side) {
  using namespace detail;
  const int64_t n = pick<int64_t>(side, 1000003, 300007, 3001);  // the first two: the grid-stride tail
  Twin a = twin_on(side, {n}, 16), b = twin_on(side, {n}, 17);
  float expected = cpu().max_abs_diff(a.cpu.data(), b.cpu.data(), n);
  CHECK(side.kernels.max_abs_diff(a.gpu.data(), b.gpu.data(), n) == expected);
  for (int64_t where : {int64_t(0), n / 2, n - 1}) {  // first block, a middle one, the grid-stride tail
    std::vector<float> values = a.cpu.to_vector();
    values[std::size_t(where)] = std::numeric_limits<float>::quiet_NaN();
    dpt::Tensor with_nan = dpt::Tensor::from_vector({n}, values, side.device);
    INFO("NaN at " << where);
    CHECK(std::isnan(side.kernels.max_abs_diff(with_nan.data(), b.gpu.data(), n)));
    CHECK(std::isnan(side.kernels.max_abs_diff(b.gpu.data(), with_nan.data(), n)));
  }
}

}  // namespace dpt_test::kernel_checks
