// exercises/15_3d_parallel/sequence_pair.cpp — hole: sequence parallelism's
// conjugate pair. The contracts are dpt::ch15::gather_sequence and
// dpt::ch15::scatter_sequence in chapters/15_3d_parallel/ch15.h; hints in
// tiers are in docs/ch15_3d_parallel.md (§ Hints).
//
// What you may use:
//   - Communicator's collectives (dpt/comm.h);
//   - rank_major and sequence_major (sequence_parallel.h): the (B·T, C) rows
//     regrouped rank by rank (block r: rank r's positions), and back;
//   - record (dpt/autograd.h): an op with your own backward, as chapter 12's
//     f and g are written; Tensor::to_vector, Tensor::from_vector.
#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/check.h"
#include "sequence_parallel.h"

namespace dpt::ch15 {

Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch) {
  (void)group, (void)mine, (void)batch;
  throw NotImplemented("ch15: gather_sequence — see exercises/15_3d_parallel/sequence_pair.cpp");
}

Tensor scatter_sequence(Communicator& group, const Tensor& partial, int64_t batch) {
  (void)group, (void)partial, (void)batch;
  throw NotImplemented("ch15: scatter_sequence — see exercises/15_3d_parallel/sequence_pair.cpp");
}

}  // namespace dpt::ch15
