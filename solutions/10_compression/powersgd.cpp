// solutions/10_compression/powersgd.cpp — one PowerSGD round (spec in ch10.h):
// P = M_r Q, averaged, then orthonormalized (only the averaged P is the same
// on every rank); Q = M_rᵀ P, averaged; the approximation P Qᵀ.
#include "ch10.h"

#include <cmath>

#include "dpt/check.h"

namespace dpt::ch10 {

namespace {
// Gram-Schmidt on the columns of p (rows, cols), modified (each column loses
// its projections one at a time), in double: columns of unit length, each
// orthogonal to the ones before it. A column with nothing left is set to 0.
void orthonormalize_columns(std::vector<float>& p, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      double dot = 0;
      for (int64_t a = 0; a < rows; ++a) dot += double(p[std::size_t(a * cols + i)]) * p[std::size_t(a * cols + j)];
      for (int64_t a = 0; a < rows; ++a) p[std::size_t(a * cols + j)] -= float(dot * p[std::size_t(a * cols + i)]);
    }
    double norm = 0;
    for (int64_t a = 0; a < rows; ++a) norm += double(p[std::size_t(a * cols + j)]) * p[std::size_t(a * cols + j)];
    norm = std::sqrt(norm);
    for (int64_t a = 0; a < rows; ++a) p[std::size_t(a * cols + j)] = norm > 0 ? float(p[std::size_t(a * cols + j)] / norm) : 0.0f;
  }
}

// c (n, k) = a (n, m) · b (m, k), or aᵀ · b when a_transposed (a is (m, n)).
std::vector<float> product(const std::vector<float>& a, bool a_transposed, const std::vector<float>& b, int64_t n,
                           int64_t m, int64_t k) {
  std::vector<float> c(std::size_t(n * k), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < m; ++l) {
      const float x = a_transposed ? a[std::size_t(l * n + i)] : a[std::size_t(i * m + l)];
      for (int64_t j = 0; j < k; ++j) c[std::size_t(i * k + j)] += x * b[std::size_t(l * k + j)];
    }
  return c;
}
}  // namespace

void powersgd_round(Communicator& comm, const std::vector<float>& m, int64_t rows, int64_t cols,
                    std::vector<float>& q, int64_t rank, std::vector<float>& approx) {
  DPT_CHECK(rank >= 1 && rank <= std::min(rows, cols) && int64_t(m.size()) == rows * cols &&
                int64_t(q.size()) == cols * rank,
            "powersgd_round: needs 1 <= rank <= min(rows, cols), m (rows, cols) and q (cols, rank); got rank "
                << rank << ", " << rows << "x" << cols << ", " << m.size() << " and " << q.size() << " floats");
  std::vector<float> p = product(m, false, q, rows, cols, rank);  // P_r = M_r Q  (rows, rank)
  comm.all_reduce(p.data(), rows * rank, ReduceOp::Avg);          // P = M Q, the same on every rank
  orthonormalize_columns(p, rows, rank);                          // only now: every rank holds the same P
  q = product(m, true, p, cols, rows, rank);                      // Q_r = M_rᵀ P  (cols, rank)
  comm.all_reduce(q.data(), cols * rank, ReduceOp::Avg);          // Q = Mᵀ P
  approx.assign(std::size_t(rows * cols), 0.0f);
  for (int64_t a = 0; a < rows; ++a)  // P Qᵀ
    for (int64_t j = 0; j < rank; ++j)
      for (int64_t b = 0; b < cols; ++b) approx[std::size_t(a * cols + b)] += p[std::size_t(a * rank + j)] * q[std::size_t(b * rank + j)];
}

}  // namespace dpt::ch10
