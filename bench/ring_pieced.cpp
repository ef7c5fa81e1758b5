// ring_pieced.cpp — the pieced ring (beyond the exercise; see ring_pieced.h).
//
// Why pieces: a scatter-reduce step receives a chunk of S/n bytes and adds it
// to ours. Received whole, it needs a scratch buffer as large as the chunk:
// written, then read back for the add, all through main memory (and from 32
// MiB on, glibc maps it fresh on every call: a page fault per 4 KiB). Received
// in pieces, the piece just received is still in cache while it is added.
#include "ring_pieced.h"

#include <algorithm>
#include <vector>

#include "ch04.h"

namespace dpt_bench {

using dpt::mod;
using dpt::Range;
using dpt::ch04::ring_chunk;

namespace {

void pieced_scatter_reduce(dpt::Communicator& comm, float* data, int64_t count) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  // Every chunk is cut into the same number of pieces on every rank, so each
  // piece we send meets a receive of the same piece on the right.
  const int64_t largest = ring_chunk(count, n, 0).size();
  const int pieces = int(std::max<int64_t>(1, (largest + kPieceFloats - 1) / kPieceFloats));
  std::vector<float> scratch(std::size_t(ring_chunk(largest, pieces, 0).size()));
  for (int s = 0; s + 1 < n; ++s) {
    Range out = ring_chunk(count, n, mod(r - s, n));
    Range in = ring_chunk(count, n, mod(r - s - 1, n));
    for (int p = 0; p < pieces; ++p) {
      Range piece_out = ring_chunk(out.size(), pieces, p), piece_in = ring_chunk(in.size(), pieces, p);
      comm.sendrecv(data + out.begin + piece_out.begin, piece_out.size(), right, scratch.data(), piece_in.size(), left);
      float* sum = data + in.begin + piece_in.begin;
      for (int64_t i = 0; i < piece_in.size(); ++i) sum[i] += scratch[std::size_t(i)];
    }
  }
}

// Finished chunks land in place, whole: nothing to add, pieces gain nothing.
void whole_all_gather(dpt::Communicator& comm, float* data, int64_t count) {
  const int n = comm.size(), r = comm.rank();
  for (int s = 0; s + 1 < n; ++s) {
    Range out = ring_chunk(count, n, mod(r + 1 - s, n)), in = ring_chunk(count, n, mod(r - s, n));
    comm.sendrecv(data + out.begin, out.size(), mod(r + 1, n), data + in.begin, in.size(), mod(r - 1, n));
  }
}
}  // namespace

void pieced_ring_all_reduce(dpt::Communicator& comm, float* data, int64_t count, dpt::ReduceOp op) {
  pieced_scatter_reduce(comm, data, count);
  if (op == dpt::ReduceOp::Avg) {  // divide only the chunk this rank owns, (r+1) mod n: one rounding, as ch04's
    Range owned = ring_chunk(count, comm.size(), (comm.rank() + 1) % comm.size());
    for (int64_t i = owned.begin; i < owned.end; ++i) data[i] /= float(comm.size());
  }
  whole_all_gather(comm, data, count);
}

}  // namespace dpt_bench
