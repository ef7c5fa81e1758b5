// solutions/16_fault_tolerance/quorum.cpp — the lighthouse's agreement on who
// trains a step, and from which step (contract: dpt::ch16::decide_quorum in ch16.h).
#include "ch16.h"

#include <algorithm>

namespace dpt::ch16 {

QuorumDecision decide_quorum(const std::map<int, int64_t>& asked, const QuorumDecision& last) {
  QuorumDecision q;
  for (const auto& [rank, committed] : asked) {  // only who asked: silence is not consent
    q.members.push_back(rank);                   // a map is ordered: ascending
    q.step = std::max(q.step, committed);        // the newest state anyone holds, never less
  }
  for (std::size_t i = 0; i < q.members.size(); ++i) {
    const int64_t committed = asked.at(q.members[i]);
    if (committed == q.step && q.source < 0) q.source = int(i);  // a holder of that state, not merely the lowest rank
    if (committed < q.step) q.behind.push_back(int(i));
  }
  q.id = q.members == last.members ? last.id : last.id + 1;  // ids only grow, so none is reused
  return q;
}

}  // namespace dpt::ch16
