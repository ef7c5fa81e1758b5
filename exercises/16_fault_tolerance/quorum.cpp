// exercises/16_fault_tolerance/quorum.cpp — hole: the lighthouse's agreement
// on who trains a step, and from which step. The contract is
// dpt::ch16::decide_quorum in chapters/16_fault_tolerance/ch16.h; hints in
// tiers are in docs/ch16_fault_tolerance.md (§ Hints).
#include "ch16.h"

#include "dpt/check.h"

namespace dpt::ch16 {

QuorumDecision decide_quorum(const std::map<int, int64_t>& asked, const QuorumDecision& last) {
  (void)asked, (void)last;
  throw NotImplemented("ch16: decide_quorum — see exercises/16_fault_tolerance/quorum.cpp");
}

}  // namespace dpt::ch16
