// exercises/09_parameter_server/server.cpp — hole: what a server does with a
// pushed gradient slice.
//
// The contract is in chapters/09_parameter_server/ch09.h (apply_push, and
// what the fields of ServerShard mean). When a sync round is complete, what
// one device's step on all the workers' samples is, and which version a
// gradient's staleness is counted from, are yours to work out.
// Hints: the chapter page, "Hints".
//
// What you have: the fields of ServerShard (scratch and tally are yours to
// use); params, scratch and grad are host memory, so plain loops are fine.
#include "ch09.h"

#include "dpt/check.h"

namespace dpt::ch09 {

bool apply_push(ServerShard& shard, int worker, const float* grad) {
  (void)shard, (void)worker, (void)grad;
  throw NotImplemented("ch09: apply_push — see exercises/09_parameter_server/server.cpp");
}

}  // namespace dpt::ch09
