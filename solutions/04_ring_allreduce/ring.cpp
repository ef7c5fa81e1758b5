// solutions/04_ring_allreduce/ring.cpp — scatter-reduce and all-gather on a ring.
//
// Each rank sends 2(n−1) chunks of ≈ S/n bytes: 2(n−1)/n·S in all, the same
// for every rank, independent of n for large n — the bandwidth-optimal
// all-reduce. The cost is 2(n−1) latencies: small messages prefer a tree.
//
// Speed: a scatter-reduce step receives a chunk and adds it to ours. Received
// whole, a chunk of S/n bytes needs a scratch buffer as large as the chunk:
// zero-filled, written, then read back for the add, all through main memory
// (and from 32 MiB on, glibc maps it fresh on every call: a page fault per
// 4 KiB). So each chunk moves in pieces of kPieceFloats instead: the piece just
// received is still in cache while it is added. The pieces go one after
// another to the same neighbour, so the bytes and the peers are exactly those
// of the whole-chunk ring. bench_allreduce measures both (bench/README.md).
#include <algorithm>
#include <vector>

#include "ch04_holes.h"

namespace dpt::ch04 {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }

// 512 KiB: a received piece and the slice of data it is added to (1 MiB
// together) stay in a core's L2 cache (1–2 MiB on current server cores), and
// a piece is large enough that the handshake each message costs (a few
// microseconds, more when ranks share cores and must wake each other) stays
// small next to moving it. Smaller pieces lose on that; larger ones on cache.
constexpr int64_t kPieceFloats = 128 * 1024;
}  // namespace

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  // Every chunk is cut into the same number of pieces, on every rank, so each
  // piece we send meets a receive of the same piece on the right. Chunk 0 is
  // the largest; piece 0 of it, the largest piece.
  const int64_t largest = ring_chunk(count, n, 0).size();
  const int pieces = int(std::max<int64_t>(1, (largest + kPieceFloats - 1) / kPieceFloats));
  std::vector<float> scratch(std::size_t(ring_chunk(largest, pieces, 0).size()));
  for (int s = 0; s + 1 < n; ++s) {
    Chunk out = ring_chunk(count, n, mod(r - s, n));
    Chunk in = ring_chunk(count, n, mod(r - s - 1, n));
    // Meanwhile the left neighbour sends us its partial sum of chunk `in`,
    // one hop further along than ours, piece by piece in the same order.
    for (int p = 0; p < pieces; ++p) {
      Chunk piece_out = ring_chunk(out.size(), pieces, p), piece_in = ring_chunk(in.size(), pieces, p);
      comm.sendrecv(data + out.begin + piece_out.begin, piece_out.size(), right,
                    scratch.data(), piece_in.size(), left);
      float* sum = data + in.begin + piece_in.begin;
      for (int64_t i = 0; i < piece_in.size(); ++i) sum[i] += scratch[std::size_t(i)];
    }
    if (after_step) after_step("scatter-reduce", s);
  }
}

void ring_all_gather(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    Chunk out = ring_chunk(count, n, mod(r + 1 - s, n));
    Chunk in = ring_chunk(count, n, mod(r - s, n));
    // Finished chunks circulate: what we receive is final, so it lands in
    // place, whole (no scratch, nothing to add: pieces would gain nothing).
    comm.sendrecv(data + out.begin, out.size(), right, data + in.begin, in.size(), left);
    if (after_step) after_step("all-gather", s);
  }
}

}  // namespace dpt::ch04
