// exercises/16_fault_tolerance/heal.cpp — hole: the heal of the members that
// are behind, from a live peer. The contract is dpt::ch16::heal in
// chapters/16_fault_tolerance/ch16.h; hints in tiers are in
// docs/ch16_fault_tolerance.md (§ Hints).
#include "ch16.h"

#include "dpt/check.h"

namespace dpt::ch16 {

void heal(Communicator& group, int source, const std::vector<int>& behind, MemberState& me) {
  (void)group, (void)source, (void)behind, (void)me;
  throw NotImplemented("ch16: heal — see exercises/16_fault_tolerance/heal.cpp");
}

}  // namespace dpt::ch16
