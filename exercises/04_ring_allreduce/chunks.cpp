// exercises/04_ring_allreduce/chunks.cpp — hole: the ring's chunks.
//
// The contract is dpt::ch04::ring_chunk in chapters/04_ring_allreduce/ch04.h:
// its postconditions (tiling, sizes, order) pin every chunk down. Try
// count = 10 with n = 4, and count = 2 with n = 3, on paper first. Hints, one
// tier at a time: the chapter page, "Hints".
//
// No loop over the chunks before i: integer division and remainder suffice.
#include "ch04.h"

#include "dpt/check.h"

namespace dpt::ch04 {

Chunk ring_chunk(int64_t count, int n, int i) {
  (void)count, (void)n, (void)i;
  throw NotImplemented("ch04: ring_chunk — see exercises/04_ring_allreduce/chunks.cpp");
}

}  // namespace dpt::ch04
