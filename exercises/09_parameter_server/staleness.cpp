// exercises/09_parameter_server/staleness.cpp — hole: when a stale-synchronous
// worker must wait.
//
// The contract is in chapters/09_parameter_server/ch09.h (ssp_must_wait).
// Whom a worker is compared with, and exactly how far ahead is too far, are
// yours to work out: write out s = 0 with two workers first.
#include "ch09.h"

#include "dpt/check.h"

namespace dpt::ch09 {

bool ssp_must_wait(const std::vector<int64_t>& completed, int worker, int max_staleness) {
  (void)completed, (void)worker, (void)max_staleness;
  throw NotImplemented("ch09: ssp_must_wait — see exercises/09_parameter_server/staleness.cpp");
}

}  // namespace dpt::ch09
