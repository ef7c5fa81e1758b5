// test_ch10_powersgd.cpp — PowerSGD's round against oracles written here in
// double: first that the P behind approx = P qᵀ has orthonormal columns
// (recovered from approx and q); at full rank the approximation is the mean matrix; below it, the
// projection of the mean onto the span of M·Q (Y (YᵀY)⁻¹ Yᵀ M, no
// orthonormalization at all), round after round with the warm-started Q; the
// same bits on every rank; only P- and Q-sized matrices travel.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <string>

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

// X (r, cols) with G X = rhs, G (r, r), by Gauss-Jordan elimination with pivoting.
Matrix solve(Matrix g, Matrix rhs, int64_t r, int64_t cols) {
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
  return rhs;
}

// The projection of `m` (rows, cols) onto the column span of y (rows, r):
// Y (YᵀY)⁻¹ Yᵀ M.
Matrix project(const Matrix& y, const Matrix& m, int64_t rows, int64_t cols, int64_t r) {
  return mul(y, false, solve(mul(y, true, y, r, rows, r), mul(y, true, m, r, rows, cols), r, cols), rows, r, cols);
}

// The contract returns approx = P qᵀ; with q of full column rank that P is
// approx q (qᵀq)⁻¹, so Pᵀ = (qᵀq)⁻¹ qᵀ approxᵀ. Returns max |PᵀP − I| (NaN
// when approx and q are not of that form at all), so a test can say whether
// the basis was orthonormal before it judges the approximation.
double basis_defect(const std::vector<float>& approx, const std::vector<float>& q, int64_t rows, int64_t cols, int64_t r) {
  if (approx.size() != std::size_t(rows * cols) || q.size() != std::size_t(cols * r)) return std::nan("");
  const Matrix a(approx.begin(), approx.end()), qd(q.begin(), q.end());
  const Matrix x = mul(a, false, qd, rows, cols, r);  // approx q = P (qᵀq)  (rows, r)
  Matrix xt(std::size_t(r * rows));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < r; ++j) xt[std::size_t(j * rows + i)] = x[std::size_t(i * r + j)];
  const Matrix pt = solve(mul(qd, true, qd, r, cols, r), xt, r, rows);  // Pᵀ (r, rows)
  double defect = 0;
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < r; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < rows; ++k) dot += pt[std::size_t(i * rows + k)] * pt[std::size_t(j * rows + k)];
      defect = dpt_test::nan_max(defect, std::fabs(dot - (i == j ? 1.0 : 0.0)));
    }
  return defect;
}

// What a failed PᵀP = I says, in words.
std::string basis_words(double defect) {
  std::ostringstream out;
  out << "the P behind approx = P qᵀ must have orthonormal columns (PᵀP = I); max |PᵀP − I| = " << defect;
  if (std::isnan(defect)) out << ": approx and q are not of the form P qᵀ at all (is q the factor that goes with P?)";
  else out << ": are P's columns normalized to length 1 (the commonest slip), orthogonal to each other, and made "
              "so after the ranks' P are averaged, not before?";
  return out.str();
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
      INFO(world << " ranks, a " << rows << "x" << cols << " matrix at rank " << rank);
      const double defect = basis_defect(got.approx[0][0], got.q[0][0], rows, cols, rank);
      INFO(basis_words(defect));
      REQUIRE(defect <= 1e-4);  // Gram-Schmidt of <= 7 columns in float, recovered in double: ~1e-6
      const double gap = relative_gap(got.approx[0][0], mean_matrix(world, 0, rows, cols));
      INFO("max |approx − mean M| / max |M| = " << gap << " — with an orthonormal P, at full rank P's columns span "
           "the mean's and P Pᵀ M = M; a gap means P spans something else, or a factor is not the ranks' mean "
           "(each rank's own M_r in it, or a sum where a mean belongs)");
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
      const double defect = basis_defect(got.approx[0][std::size_t(t)], got.q[0][std::size_t(t)], rows, cols, rank);
      INFO(world << " ranks, round " << t << ": " << basis_words(defect));
      REQUIRE(defect <= 1e-4);
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
