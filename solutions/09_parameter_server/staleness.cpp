// solutions/09_parameter_server/staleness.cpp — the stale-synchronous bound
// (spec: ch09.h; Ho et al., "More effective distributed ML via a stale
// synchronous parallel parameter server", NIPS 2013). A worker that has
// finished c steps starts step c; the slowest has finished m. Lockstep (s = 0)
// lets it start only when m = c, so it may go while c − m <= s.
#include <algorithm>

#include "ch09.h"

namespace dpt::ch09 {

bool ssp_must_wait(const std::vector<int64_t>& completed, int worker, int max_staleness) {
  const int64_t slowest = *std::min_element(completed.begin(), completed.end());
  return completed[std::size_t(worker)] - slowest > max_staleness;
}

}  // namespace dpt::ch09
