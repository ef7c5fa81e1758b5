// exercises/15_3d_parallel/grid_place.cpp — hole: a rank's coordinates and
// groups on the tp × dp × pp grid. The contract is dpt::ch15::grid_place in
// chapters/15_3d_parallel/ch15.h; hints in tiers are in
// docs/ch15_3d_parallel.md (§ Hints).
//
// What you may use: integer arithmetic; DPT_CHECK (dpt/check.h) for the
// precondition. No communication: every rank can answer for every rank.
#include "ch15.h"
#include "dpt/check.h"

namespace dpt::ch15 {

GridPlace grid_place(int rank, int tp, int dp, int pp) {
  (void)rank, (void)tp, (void)dp, (void)pp;
  throw NotImplemented("ch15: grid_place — see exercises/15_3d_parallel/grid_place.cpp");
}

}  // namespace dpt::ch15
