// solutions/10_compression/powersgd.cpp — one PowerSGD round (spec in ch10.h):
// P = M_r Q, averaged, then orthonormalized (only the averaged P is the same
// on every rank); Q = M_rᵀ P, averaged; the approximation P Qᵀ.
//
// P and Q are kept transposed, Pᵀ (R, rows) and Qᵀ (R, cols): each column
// is then a contiguous row, and each product comes out wide, (R, big), which
// the core's gemm computes about twice as fast as the tall (big, R) one
// (bench/README.md, bench_compress). Only the returned q is (cols, R).
#include "ch10.h"

#include <cmath>

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch10 {

namespace {
// Gram-Schmidt on the rows of pt (R, rows), modified (each row loses its
// projections one at a time), in double: rows of unit length, each
// orthogonal to the ones before it. A row with nothing left is set to 0.
void orthonormalize_rows(Tensor& pt) {
  const int64_t count = pt.shape()[0], length = pt.shape()[1];
  for (int64_t j = 0; j < count; ++j) {
    float* v = pt.data() + j * length;
    for (int64_t i = 0; i < j; ++i) {
      const float* u = pt.data() + i * length;
      double dot = 0;
      for (int64_t a = 0; a < length; ++a) dot += double(u[a]) * v[a];
      for (int64_t a = 0; a < length; ++a) v[a] -= float(dot * u[a]);
    }
    double norm = 0;
    for (int64_t a = 0; a < length; ++a) norm += double(v[a]) * v[a];
    norm = std::sqrt(norm);
    for (int64_t a = 0; a < length; ++a) v[a] = norm > 0 ? float(v[a] / norm) : 0.0f;
  }
}
}  // namespace

void powersgd_round(Communicator& comm, const Tensor& m, Tensor& q, Tensor& approx) {
  DPT_CHECK(m.shape().size() == 2 && q.shape().size() == 2 && q.shape()[0] == m.shape()[1] && q.shape()[1] >= 1 &&
                q.shape()[1] <= std::min(m.shape()[0], m.shape()[1]),
            "powersgd_round: needs m (rows, cols) and q (cols, R) with 1 <= R <= min(rows, cols); got m "
                << shape_str(m.shape()) << " and q " << shape_str(q.shape()));
  const int64_t rows = m.shape()[0], cols = m.shape()[1], rank = q.shape()[1];
  Tensor pt = Tensor::empty({rank, rows}, m.device());
  gemm(q, true, m, true, pt);                               // P_rᵀ = Qᵀ M_rᵀ  (R, rows)
  comm.all_reduce(pt.data(), pt.numel(), ReduceOp::Avg);    // Pᵀ = (M Q)ᵀ, the same on every rank
  orthonormalize_rows(pt);                                  // only now: every rank holds the same P
  Tensor qt = Tensor::empty({rank, cols}, m.device());
  gemm(pt, false, m, false, qt);                            // Q_rᵀ = Pᵀ M_r  (R, cols)
  comm.all_reduce(qt.data(), qt.numel(), ReduceOp::Avg);    // Qᵀ = (Mᵀ P)ᵀ
  q = Tensor::empty({cols, rank}, m.device());              // q = (Qᵀ)ᵀ  (cols, R)
  const float* from = qt.data();
  float* to = q.data();
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t k = 0; k < rank; ++k) to[c * rank + k] = from[k * cols + c];
  approx = Tensor::empty({rows, cols}, m.device());
  gemm(pt, true, qt, false, approx);                        // P Qᵀ
}

}  // namespace dpt::ch10
