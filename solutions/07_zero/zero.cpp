// solutions/07_zero/zero.cpp — chapter 07's holes, the plainest correct code:
// the flat partition, who owns which part of a range, stage 2's reduce-scatter
// of one bucket, stage 3's gather and free of one layer. The buffers may be
// GPU memory: they are only copied (copy_floats) and divided (divide_floats),
// never read on the host.
#include <algorithm>

#include "ch07.h"
#include "dpt/check.h"
#include "dpt/floats.h"
#include "dpt/memory_ledger.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

Partition partition_parameters(int64_t psi, int world) {
  DPT_CHECK(psi >= 1, "partition: the model must have at least one parameter, got " << psi);
  DPT_CHECK(world >= 1, "partition: need at least one rank, got " << world);
  Partition p;
  p.psi = psi, p.world = world;
  p.shard = (psi + world - 1) / world;  // ⌈Ψ/N⌉: the last shard ends in < N zeros of padding
  p.padded = p.shard * world;
  return p;
}

std::vector<int64_t> shard_bounds(const Partition& part, Range range) {
  DPT_CHECK(0 <= range.begin && range.begin <= range.end && range.end <= part.padded,
            "range [" << range.begin << ", " << range.end << ") is not inside the flat buffer [0, " << part.padded
                      << ")");
  std::vector<int64_t> bounds;
  for (int r = 0; r <= part.world; ++r)  // rank r's shard starts at r·S; clamp it into the range
    bounds.push_back(std::clamp(r * part.shard - range.begin, int64_t(0), range.size()));
  return bounds;
}

void reduce_scatter_bucket(Communicator& comm, const Partition& part, Range range, float* bucket, float* grad_shard) {
  std::vector<int64_t> bounds = shard_bounds(part, range);
  ring_reduce_scatter(comm, bucket, bounds);  // our part of the bucket now holds the sum
  const int r = comm.rank();
  int64_t begin = bounds[std::size_t(r)], count = bounds[std::size_t(r) + 1] - begin;
  divide_floats(bucket + begin, count, float(part.world));  // the mean, divided as every stage divides
  int64_t into = range.begin + begin - r * part.shard;     // where the part sits in our shard
  copy_floats(grad_shard + into, bucket + begin, count);
}

Tensor gather_layer(Communicator& comm, const Partition& part, Range range, const Tensor& param_shard, Device& device) {
  std::vector<int64_t> bounds = shard_bounds(part, range);
  Tensor full;
  {
    MemoryScope scope(MemoryCategory::Comm);
    full = Tensor::empty({range.size()}, device);
  }
  const int r = comm.rank();
  int64_t begin = bounds[std::size_t(r)], count = bounds[std::size_t(r) + 1] - begin;
  const float* mine = param_shard.data() + (range.begin + begin - r * part.shard);
  copy_floats(full.data() + begin, mine, count);
  ring_all_gather(comm, full.data(), bounds);
  return full;
}

void release_layer(Tensor& gathered) { gathered = Tensor(); }

}  // namespace dpt::ch07
