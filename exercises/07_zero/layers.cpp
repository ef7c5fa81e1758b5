// exercises/07_zero/layers.cpp — holes: a layer's parameters around its use
// (stage 3 has no full copy), and the gather and release they need.
//
// Contracts: chapters/07_zero/ch07.h (layer_parameters, layer_done,
// gather_layer, release_layer). Hints, one tier at a time: docs/ch07_zero.md,
// "Hints".
//  * Provided: ring_all_gather (sharded_ring.h), shard_bounds, Tensor::empty
//    and slice, copy_floats (dpt/floats.h), and MemoryScope
//    (dpt/memory_ledger.h), which charges what is allocated inside it.
#include "ch07.h"

#include "dpt/floats.h"
#include "dpt/memory_ledger.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

Tensor layer_parameters(ZeroState& s, int l) {
  (void)s, (void)l;
  throw NotImplemented("ch07: layer_parameters — see exercises/07_zero/layers.cpp");
}

void layer_done(ZeroState& s, int l) {
  (void)s, (void)l;
  throw NotImplemented("ch07: layer_done — see exercises/07_zero/layers.cpp");
}

Tensor gather_layer(Communicator& comm, const Partition& part, Range range, const Tensor& param_shard, Device& device) {
  (void)comm, (void)part, (void)range, (void)param_shard, (void)device;
  throw NotImplemented("ch07: gather_layer — see exercises/07_zero/layers.cpp");
}

void release_layer(Tensor& gathered) {
  (void)gathered;
  throw NotImplemented("ch07: release_layer — see exercises/07_zero/layers.cpp");
}

}  // namespace dpt::ch07
