// exercises/16_fault_tolerance/commit.cpp — hole: a step that commits on every
// member or on none. The contract is dpt::ch16::commit_step in
// chapters/16_fault_tolerance/ch16.h; hints in tiers are in
// docs/ch16_fault_tolerance.md (§ Hints).
#include "ch16.h"

#include "dpt/check.h"

namespace dpt::ch16 {

bool commit_step(Communicator& group, Replica& replica, const std::vector<float>& grad, float lr, bool fine) {
  (void)group, (void)replica, (void)grad, (void)lr, (void)fine;
  throw NotImplemented("ch16: commit_step — see exercises/16_fault_tolerance/commit.cpp");
}

}  // namespace dpt::ch16
