// solutions/16_fault_tolerance/commit.cpp — a step that commits on every
// member or on none (contract: dpt::ch16::commit_step in ch16.h).
#include "ch16.h"

namespace dpt::ch16 {

bool commit_step(Communicator& group, Replica& replica, const std::vector<float>& grad, float lr, bool fine) {
  // The vote: one float per member. A collective returns on every member or
  // throws on every member, so its sum is known to all or to none.
  float yes = fine ? 1.0f : 0.0f;
  group.all_reduce(&yes, 1, ReduceOp::Sum);
  if (yes != float(group.size())) return false;
  apply_momentum(replica, grad, lr);  // only now: nothing was changed before every member agreed
  return true;
}

}  // namespace dpt::ch16
