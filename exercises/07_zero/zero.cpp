// exercises/07_zero/zero.cpp — holes: the flat partition, who owns which part
// of a range, stage 2's reduce-scatter of one bucket, stage 3's gather and
// free of one layer.
//
// The spec of all five is in chapters/07_zero/ch07.h: read it first.
//
// The buffers may be GPU memory (--device cuda): never read or write them
// with [i], a loop or std::copy — the host cannot. Copy with
// dpt::copy_floats(dst, src, count) and divide with
// dpt::divide_floats(data, count, divisor) (dpt/floats.h); on host memory
// they are the plain loops, on a GPU copies and kernels.
//
// Hints:
//  * partition_parameters: S = (Ψ + N − 1) / N in integers; padded = N·S.
//    Check Ψ >= 1 and N >= 1 with DPT_CHECK.
//  * shard_bounds: rank r's shard starts at r·S. Relative to the range that is
//    r·S − range.begin, clamped into [0, range.size()] (std::clamp). Do it for
//    r = 0 … N (N+1 entries): entry N clamps to range.size().
//  * reduce_scatter_bucket: ring_reduce_scatter(comm, bucket, bounds) from
//    sharded_ring.h, then divide_floats(…, float(N)) on YOUR part only, then
//    copy_floats it into grad_shard at (range.begin + bounds[r]) − r·S.
//  * gather_layer: allocate inside { dpt::MemoryScope s(dpt::MemoryCategory::Comm); … }
//    (dpt/memory_ledger.h); copy_floats your part from param_shard.data()
//    (same offset rule as above, the other way round), then ring_all_gather.
//  * release_layer: one line.
#include "ch07.h"

#include "dpt/check.h"

namespace dpt::ch07 {

Partition partition_parameters(int64_t psi, int world) {
  (void)psi, (void)world;
  throw NotImplemented("ch07: partition_parameters — see exercises/07_zero/zero.cpp");
}

std::vector<int64_t> shard_bounds(const Partition& part, Range range) {
  (void)part, (void)range;
  throw NotImplemented("ch07: shard_bounds — see exercises/07_zero/zero.cpp");
}

void reduce_scatter_bucket(Communicator& comm, const Partition& part, Range range, float* bucket, float* grad_shard) {
  (void)comm, (void)part, (void)range, (void)bucket, (void)grad_shard;
  throw NotImplemented("ch07: reduce_scatter_bucket — see exercises/07_zero/zero.cpp");
}

Tensor gather_layer(Communicator& comm, const Partition& part, Range range, const Tensor& param_shard, Device& device) {
  (void)comm, (void)part, (void)range, (void)param_shard, (void)device;
  throw NotImplemented("ch07: gather_layer — see exercises/07_zero/zero.cpp");
}

void release_layer(Tensor& gathered) {
  (void)gathered;
  throw NotImplemented("ch07: release_layer — see exercises/07_zero/zero.cpp");
}

}  // namespace dpt::ch07
