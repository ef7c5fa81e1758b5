// exercises/10_compression/diloco.cpp — hole: DiLoCo's outer step. The
// contract is dpt::ch10::diloco_outer_step in chapters/10_compression/ch10.h;
// hints in tiers are in docs/ch10_compression.md (§ Hints).
//
// Pointers:
//   - comm.all_reduce(ptr, count, ReduceOp::Avg): the library all-reduce.
//   - SGD with Nesterov momentum, as PyTorch defines it, is written out on
//     the chapter page (docs/ch10_compression.md, § DiLoCo).
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void diloco_outer_step(Communicator& comm, std::vector<float>& params, const std::vector<float>& before,
                       std::vector<float>& momentum, float outer_lr, float outer_momentum) {
  (void)comm, (void)params, (void)before, (void)momentum, (void)outer_lr, (void)outer_momentum;
  throw NotImplemented("ch10: diloco_outer_step — see exercises/10_compression/diloco.cpp");
}

}  // namespace dpt::ch10
