// exercises/07_zero/layers.cpp — hole: the life of a layer's parameters
// around one use of them (its forward, or its backward), at every stage.
//
// Contract: chapters/07_zero/ch07.h (use_layer; ZeroState says what each
// stage keeps). Hints, one tier at a time: docs/ch07_zero.md, "Hints".
//  * Provided: ring_all_gather (sharded_ring.h), shard_bounds,
//    Tensor::empty and slice, copy_floats (dpt/floats.h), and the memory
//    ledger's categories (dpt/memory_ledger.h).
//  * The tests watch the bytes each rank sends and the comm buffers it holds
//    before, during and after `use`.
#include "ch07.h"

#include "dpt/floats.h"
#include "dpt/memory_ledger.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

void use_layer(ZeroState& s, int l, const std::function<void(const Tensor& params)>& use) {
  (void)s, (void)l, (void)use;
  throw NotImplemented("ch07: use_layer — see exercises/07_zero/layers.cpp");
}

}  // namespace dpt::ch07
