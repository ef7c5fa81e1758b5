// exercises/10_compression/powersgd.cpp — hole: one round of PowerSGD on a
// weight matrix. The contract is dpt::ch10::powersgd_round in
// chapters/10_compression/ch10.h; hints in tiers are in
// docs/ch10_compression.md (§ Hints).
//
// Pointers:
//   - comm.all_reduce(ptr, count, ReduceOp::Avg): the library all-reduce.
//   - dpt/ops.h: matmul(a, b), and gemm(a, transpose_a, b, transpose_b, c)
//     for a product with a transposed operand, into a tensor you made
//     (Tensor::zeros(shape, m.device())).
//   - t.data() is a tensor's row-major floats: element (i, j) of an (r, c)
//     tensor is at i * c + j. Accumulate dot products in double.
//   - Helpers of your own go in an anonymous namespace in this file.
#include "ch10.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch10 {

void powersgd_round(Communicator& comm, const Tensor& m, Tensor& q, Tensor& approx) {
  (void)comm, (void)m, (void)q, (void)approx;
  throw NotImplemented("ch10: powersgd_round — see exercises/10_compression/powersgd.cpp");
}

}  // namespace dpt::ch10
