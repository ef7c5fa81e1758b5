// exercises/08_collectives/halving_doubling.cpp — holes: Rabenseifner's
// all-reduce (reduce-scatter by halving, all-gather by doubling, any n).
//
// The contracts are in chapters/08_collectives/ch08.h. Who is whose partner
// at each step, and which half each keeps, is yours to work out: draw 4 and
// then 8 ranks on paper, with the blocks each still holds. Hints, one tier at
// a time: the chapter page, "Hints".
//
// What you have: Team (send / recv / sendrecv by team index, sub), block_range,
// power_of_two_below (ch08.h); dpt::Floats, dpt::add_floats (dpt/floats.h).
// recursive_doubling.cpp (another fold than yours) is for when your holes pass.
#include "ch08.h"

#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch08 {

void halving_reduce_scatter(const Team& team, float* data, int64_t count) {
  (void)team, (void)data, (void)count;
  throw NotImplemented("ch08: halving_reduce_scatter — see exercises/08_collectives/halving_doubling.cpp");
}

void doubling_all_gather(const Team& team, float* data, int64_t count) {
  (void)team, (void)data, (void)count;
  throw NotImplemented("ch08: doubling_all_gather — see exercises/08_collectives/halving_doubling.cpp");
}

void halving_doubling_all_reduce(const Team& team, float* data, int64_t count) {
  (void)team, (void)data, (void)count;
  throw NotImplemented("ch08: halving_doubling_all_reduce — see exercises/08_collectives/halving_doubling.cpp");
}

}  // namespace dpt::ch08
