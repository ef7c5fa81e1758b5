// test_ch10_powersgd.cpp — PowerSGD's round against oracles written here in
// double: at full rank the approximation is the mean matrix; below it, the
// projection of the mean onto the span of M·Q (Y (YᵀY)⁻¹ Yᵀ M, no
// orthonormalization at all), round after round with the warm-started Q; the
// same bits on every rank; only P- and Q-sized matrices travel.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "ch10.h"
#include "support/ranks.h"
#include "support/single_device.h"  // nan_max

using namespace dpt;
using namespace dpt::ch10;

namespace {
using Matrix = std::vector<double>;  // row-major

std::vector<float> random_matrix(uint32_t seed, int64_t rows, int64_t cols) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal;
  std::vector<float> m(std::size_t(rows * cols));
  for (float& v : m) v = normal(generator);
  return m;
}

// c (n, k) = a (n, m) b (m, k); `ta`: a is given as (m, n) and transposed.
Matrix mul(const Matrix& a, bool ta, const Matrix& b, int64_t n, int64_t m, int64_t k) {
  Matrix c(std::size_t(n * k), 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t l = 0; l < m; ++l) c[std::size_t(i * k + j)] += (ta ? a[std::size_t(l * n + i)] : a[std::size_t(i * m + l)]) * b[std::size_t(l * k + j)];
  return c;
}

// The projection of `m` (rows, cols) onto the column span of y (rows, r):
// Y (YᵀY)⁻¹ Yᵀ M, with (YᵀY)⁻¹ Yᵀ M solved by Gauss-Jordan elimination.
Matrix project(const Matrix& y, const Matrix& m, int64_t rows, int64_t cols, int64_t r) {
  Matrix g = mul(y, true, y, r, rows, r), rhs = mul(y, true, m, r, rows, cols);
  for (int64_t p = 0; p < r; ++p) {
    int64_t pivot = p;
    for (int64_t i = p + 1; i < r; ++i) if (std::fabs(g[std::size_t(i * r + p)]) > std::fabs(g[std::size_t(pivot * r + p)])) pivot = i;
    for (int64_t j = 0; j < r; ++j) std::swap(g[std::size_t(p * r + j)], g[std::size_t(pivot * r + j)]);
    for (int64_t j = 0; j < cols; ++j) std::swap(rhs[std::size_t(p * cols + j)], rhs[std::size_t(pivot * cols + j)]);
    for (int64_t i = 0; i < r; ++i) {
      if (i == p) continue;
      const double f = g[std::size_t(i * r + p)] / g[std::size_t(p * r + p)];
      for (int64_t j = 0; j < r; ++j) g[std::size_t(i * r + j)] -= f * g[std::size_t(p * r + j)];
      for (int64_t j = 0; j < cols; ++j) rhs[std::size_t(i * cols + j)] -= f * rhs[std::size_t(p * cols + j)];
    }
  }
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < cols; ++j) rhs[std::size_t(i * cols + j)] /= g[std::size_t(i * r + i)];
  return mul(y, false, rhs, rows, r, cols);
}

struct Rounds {
  std::vector<std::vector<std::vector<float>>> approx, q;  // [rank][round]
  int64_t calls = -1, bytes = -1;                          // rank 0's all_reduce calls and payload
};

// `rounds` rounds on `world` ranks; rank r's matrix at round t from seed 10·t + r.
Rounds run_rounds(int world, int64_t rows, int64_t cols, int64_t rank, int rounds) {
  Rounds out;
  out.approx.resize(std::size_t(world)), out.q.resize(std::size_t(world));
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Tensor q = Tensor::from_vector({cols, rank}, random_matrix(999, cols, rank), Device::host()), approx;
    std::vector<std::vector<float>> approxes, qs;
    ctx.comm.barrier();
    for (int t = 0; t < rounds; ++t) {
      powersgd_round(ctx.comm, Tensor::from_vector({rows, cols}, random_matrix(uint32_t(10 * t + ctx.rank), rows, cols), Device::host()),
                     q, approx);
      approxes.push_back(approx.defined() ? approx.to_vector() : std::vector<float>());
      qs.push_back(q.defined() ? q.to_vector() : std::vector<float>());
    }
    ctx.comm.barrier();
    std::lock_guard<std::mutex> lock(mutex);
    out.approx[std::size_t(ctx.rank)] = approxes, out.q[std::size_t(ctx.rank)] = qs;
    if (ctx.is_root()) out.calls = ctx.comm.traffic().collective_calls("all_reduce", 0), out.bytes = ctx.comm.traffic().collective_bytes("all_reduce", 0);
  });
  return out;
}

Matrix mean_matrix(int world, int t, int64_t rows, int64_t cols) {
  Matrix mean(std::size_t(rows * cols), 0);
  for (int r = 0; r < world; ++r) {
    std::vector<float> m = random_matrix(uint32_t(10 * t + r), rows, cols);
    for (std::size_t i = 0; i < m.size(); ++i) mean[i] += double(m[i]) / world;
  }
  return mean;
}

double relative_gap(const std::vector<float>& got, const Matrix& want) {
  if (got.size() != want.size()) return std::nan("");
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) gap = dpt_test::nan_max(gap, std::fabs(got[i] - want[i])), scale = std::max(scale, std::fabs(want[i]));
  return gap / scale;
}
}  // namespace

TEST_CASE("PowerSGD at full rank = the uncompressed mean, on 1-4 ranks", "[ch10][hole:powersgd_round]") {
  for (int world : {1, 2, 3, 4})
    for (auto shape : {std::pair<int64_t, int64_t>{7, 4}, {4, 7}, {5, 5}}) {
      const int64_t rows = shape.first, cols = shape.second, rank = std::min(rows, cols);
      Rounds got = run_rounds(world, rows, cols, rank, 1);
      const double gap = relative_gap(got.approx[0][0], mean_matrix(world, 0, rows, cols));
      INFO(world << " ranks, a " << rows << "x" << cols << " matrix at rank " << rank << ": max |approx − mean M| / max |M| = "
                 << gap << " — at full rank P's columns span the mean's, so P Pᵀ M = M. Off by O(1): P orthonormalized "
                    "before it was averaged (the ranks' P differ, their mean is not orthonormal), or a factor not averaged");
      CHECK(gap <= 1e-5);  // products of <= 7 terms and a Gram-Schmidt of 7 columns in float: ~1e-6
    }
}

TEST_CASE("PowerSGD below full rank projects the mean onto span(M Q), warm-started round after round", "[ch10][hole:powersgd_round]") {
  const int64_t rows = 9, cols = 6, rank = 2;
  for (int world : {1, 3}) {
    Rounds got = run_rounds(world, rows, cols, rank, 3);
    Matrix q(std::size_t(cols * rank));
    std::vector<float> q0 = random_matrix(999, cols, rank);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = q0[i];
    for (int t = 0; t < 3; ++t) {
      const Matrix m = mean_matrix(world, t, rows, cols);
      const Matrix y = mul(m, false, q, rows, cols, rank);  // Y = M Q: its span is P's
      const Matrix want = project(y, m, rows, cols, rank);
      const double gap = relative_gap(got.approx[0][std::size_t(t)], want);
      INFO(world << " ranks, round " << t << ": max |approx − proj_span(M Q) M| / max = " << gap
                 << " — approx must be P Pᵀ M with P an orthonormal basis of the mean M times the Q the last round "
                    "left (the warm start: Q = Mᵀ P)");
      CHECK(gap <= 1e-4);
      // The next round's Q spans what Mᵀ P spans: Mᵀ Y (Y and P have the same span).
      q = mul(m, true, y, cols, rows, rank);
    }
  }
}

TEST_CASE("PowerSGD: the same bits on every rank, and only P- and Q-sized matrices travel", "[ch10][hole:powersgd_round]") {
  const int64_t rows = 8, cols = 5, rank = 2;
  Rounds got = run_rounds(3, rows, cols, rank, 2);
  for (std::size_t r = 1; r < 3; ++r)
    for (int t = 0; t < 2; ++t) {
      INFO("rank " << r << ", round " << t << ": approx or Q differ from rank 0's bits — every rank must finish with "
                   "the same P and the same averaged Q");
      CHECK(got.approx[r][std::size_t(t)] == got.approx[0][std::size_t(t)]);
      CHECK(got.q[r][std::size_t(t)] == got.q[0][std::size_t(t)]);
    }
  INFO("2 rounds should make 4 all-reduces of " << rank * (rows + cols) * 4 * 2 << " bytes in all (per round one P, "
       << rows << "x" << rank << ", and one Q, " << cols << "x" << rank << "); saw " << got.calls << " calls of "
       << got.bytes << " bytes" << (got.bytes >= 2 * 4 * rows * cols ? " — as much as M_r itself: only P and Q may travel" : ""));
  CHECK(got.calls == 4);
  CHECK(got.bytes == 2 * 4 * rank * (rows + cols));
}
