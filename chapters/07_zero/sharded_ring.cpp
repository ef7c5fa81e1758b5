// sharded_ring.cpp — ring reduce-scatter and all-gather whose chunk r ends on
// rank r, for ZeRO's fixed ownership (provided: chapter 04 taught the ring).
// The buffers may be host or GPU memory: the scratch lives next to `data` and
// the add runs where it lives (dpt/floats.h).
#include "sharded_ring.h"

#include <algorithm>
#include <string>

#include "dpt/check.h"
#include "dpt/floats.h"
#include "dpt/range.h"

namespace dpt::ch07 {

namespace {

// ch07's chunk bounds are always shard_bounds's result: a broken one is
// named here, at its first use, rather than as a fault of the hole that passed it on.
std::string listed(const std::vector<int64_t>& bounds) {
  std::string text = "{";
  for (std::size_t i = 0; i < bounds.size() && i < 9; ++i) text += (i ? ", " : "") + std::to_string(bounds[i]);
  return text + (bounds.size() > 9 ? ", …}" : "}");
}

void check_bounds(const Communicator& comm, const std::vector<int64_t>& bounds) {
  const char* at_fault = "shard_bounds (exercises/07_zero/partition.cpp) returned ";
  DPT_CHECK(int(bounds.size()) == comm.size() + 1,
            at_fault << listed(bounds) << ": " << bounds.size() << " bounds for " << comm.size()
                     << " ranks; rank r owns [b[r], b[r+1]), so N ranks need N+1 bounds");
  DPT_CHECK(bounds.front() == 0, at_fault << listed(bounds) << ": b[0] must be 0, the range's own start (the "
                                             "bounds are relative to range.begin)");
  for (std::size_t i = 1; i < bounds.size(); ++i)
    DPT_CHECK(bounds[i] >= bounds[i - 1], at_fault << listed(bounds) << ": b[" << i << "] < b[" << i - 1
                                                   << "]; rank " << i - 1 << "'s part would end before it starts "
                                                      "(the bounds never decrease: shards come in rank order)");
}

// Chunk i of the ring: [bounds[i], bounds[i+1]) (checked by check_bounds).
Range chunk(const std::vector<int64_t>& bounds, int i) {
  return {bounds[std::size_t(i)], bounds[std::size_t(i) + 1]};
}
}  // namespace

void ring_reduce_scatter(Communicator& comm, float* data, const std::vector<int64_t>& bounds) {
  check_bounds(comm, bounds);
  const int n = comm.size(), r = comm.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  int64_t largest = 0;
  for (int c = 0; c < n; ++c) largest = std::max(largest, chunk(bounds, c).size());
  Floats scratch(data, n > 1 ? largest : 0);  // in data's memory: a received chunk is added where it lands
  for (int s = 0; s + 1 < n; ++s) {
    // Step s: chunk r−s−1 leaves for the right neighbour (which adds its own
    // values to it); the left neighbour's partial sum of chunk r−s−2 arrives.
    // At s = n−2 that is chunk r: complete, here, where it belongs.
    Range out = chunk(bounds, mod(r - s - 1, n)), in = chunk(bounds, mod(r - s - 2, n));
    comm.sendrecv(data + out.begin, out.size(), right, scratch.data(), in.size(), left);
    add_floats(data + in.begin, scratch.data(), in.size());  // data[in.begin + i] += scratch[i]
  }
}

void ring_all_gather(Communicator& comm, float* data, const std::vector<int64_t>& bounds) {
  check_bounds(comm, bounds);
  const int n = comm.size(), r = comm.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    // Step s: we pass on chunk r−s (our own at s = 0), final, and store chunk
    // r−s−1 from the left in place.
    Range out = chunk(bounds, mod(r - s, n)), in = chunk(bounds, mod(r - s - 1, n));
    comm.sendrecv(data + out.begin, out.size(), right, data + in.begin, in.size(), left);
  }
}

}  // namespace dpt::ch07
