// exercises/10_compression/powersgd.cpp — hole: one round of PowerSGD on a
// weight matrix. The contract is dpt::ch10::powersgd_round in
// chapters/10_compression/ch10.h; hints in tiers are in
// docs/ch10_compression.md (§ Hints).
//
// Pointers:
//   - comm.all_reduce(ptr, count, ReduceOp::Avg): the library all-reduce.
//   - Matrices are row-major std::vector<float>: element (i, j) of an
//     (r, c) matrix is at i * c + j. Plain loops are fast enough here
//     (784 x 256 x R); accumulate dot products in double.
//   - Helpers of your own go in an anonymous namespace in this file.
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void powersgd_round(Communicator& comm, const std::vector<float>& m, int64_t rows, int64_t cols,
                    std::vector<float>& q, int64_t rank, std::vector<float>& approx) {
  (void)comm, (void)m, (void)rows, (void)cols, (void)q, (void)rank, (void)approx;
  throw NotImplemented("ch10: powersgd_round — see exercises/10_compression/powersgd.cpp");
}

}  // namespace dpt::ch10
