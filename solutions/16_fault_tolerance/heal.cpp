// solutions/16_fault_tolerance/heal.cpp — reference answer for the heal
// (chapters/16_fault_tolerance/ch16.h). A replica is what its next step
// reads and what it tells the lighthouse: the parameters, the momentum, the
// committed steps and the cursor. The last gradient is not (the next step
// computes its own), nor the member's identity or timing (they are its own).
#include "ch16.h"

#include <algorithm>
#include <cstdint>

namespace dpt::ch16 {

void heal(Communicator& group, int source, const std::vector<int>& behind, MemberState& me) {
  const int self = group.rank();
  const bool mine = std::binary_search(behind.begin(), behind.end(), self);
  if (self != source && !mine) return;
  int64_t where[2] = {me.committed, me.cursor};
  std::vector<float>& w = me.replica.params;
  std::vector<float>& v = me.replica.momentum;
  if (self == source) {
    for (int j : behind) {
      group.send(w.data(), int64_t(w.size()), j, 21);
      group.send(v.data(), int64_t(v.size()), j, 22);
      group.send(where, 2, j, 23);
    }
    return;
  }
  group.recv(w.data(), int64_t(w.size()), source, 21);
  group.recv(v.data(), int64_t(v.size()), source, 22);
  group.recv(where, 2, source, 23);
  me.committed = where[0], me.cursor = where[1];
}

}  // namespace dpt::ch16
