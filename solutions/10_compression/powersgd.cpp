// solutions/10_compression/powersgd.cpp — one PowerSGD round (spec in ch10.h):
// P = M_r Q, averaged, then orthonormalized (only the averaged P is the same
// on every rank); Q = M_rᵀ P, averaged; the approximation P Qᵀ.
#include "ch10.h"

#include <cmath>

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch10 {

namespace {
// Gram-Schmidt on the columns of p (rows, cols), modified (each column loses
// its projections one at a time), in double: columns of unit length, each
// orthogonal to the ones before it. A column with nothing left is set to 0.
void orthonormalize_columns(Tensor& p) {
  const int64_t rows = p.shape()[0], cols = p.shape()[1];
  float* x = p.data();
  auto at = [&](int64_t a, int64_t j) -> float& { return x[a * cols + j]; };
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < j; ++i) {
      double dot = 0;
      for (int64_t a = 0; a < rows; ++a) dot += double(at(a, i)) * at(a, j);
      for (int64_t a = 0; a < rows; ++a) at(a, j) -= float(dot * at(a, i));
    }
    double norm = 0;
    for (int64_t a = 0; a < rows; ++a) norm += double(at(a, j)) * at(a, j);
    norm = std::sqrt(norm);
    for (int64_t a = 0; a < rows; ++a) at(a, j) = norm > 0 ? float(at(a, j) / norm) : 0.0f;
  }
}
}  // namespace

void powersgd_round(Communicator& comm, const Tensor& m, Tensor& q, Tensor& approx) {
  DPT_CHECK(m.shape().size() == 2 && q.shape().size() == 2 && q.shape()[0] == m.shape()[1] && q.shape()[1] >= 1 &&
                q.shape()[1] <= std::min(m.shape()[0], m.shape()[1]),
            "powersgd_round: needs m (rows, cols) and q (cols, R) with 1 <= R <= min(rows, cols); got m "
                << shape_str(m.shape()) << " and q " << shape_str(q.shape()));
  const int64_t rows = m.shape()[0], cols = m.shape()[1], rank = q.shape()[1];
  Tensor p = matmul(m, q);                                    // P_r = M_r Q  (rows, R)
  comm.all_reduce(p.data(), p.numel(), ReduceOp::Avg);        // P = M Q, the same on every rank
  orthonormalize_columns(p);                                  // only now: every rank holds the same P
  Tensor next = Tensor::zeros({cols, rank}, m.device());
  gemm(m, true, p, false, next);                              // Q_r = M_rᵀ P  (cols, R)
  comm.all_reduce(next.data(), next.numel(), ReduceOp::Avg);  // Q = Mᵀ P
  q = next;
  approx = Tensor::zeros({rows, cols}, m.device());
  gemm(p, false, q, true, approx);                            // P Qᵀ
}

}  // namespace dpt::ch10
