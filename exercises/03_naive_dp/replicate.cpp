// exercises/03_naive_dp/replicate.cpp — hole: replicas from the master copy.
// Contract: ch03::replicate_master in chapters/03_naive_dp/ch03.h.
//
// Pointers: copy_parameters (dpt/nn.h) copies one model into another on any
// device; ctx.comm / comm (dpt/comm/communicator.h) moves floats between
// ranks. A replica's parameters() are handles: writing into them writes the
// model. Hints, in tiers: docs/ch03_naive_dp.md, "Hints".
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

void replicate_master(Communicator& comm, const MLP* master, MLP& replica) {
  (void)comm, (void)master, (void)replica;
  throw NotImplemented("ch03: replicate_master — see exercises/03_naive_dp/replicate.cpp");
}

}  // namespace dpt::ch03
