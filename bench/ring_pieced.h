// ring_pieced.h — beyond the exercise: chapter 04's ring, with each chunk
// moved in cache-sized pieces. Same peers, same bytes, same result as the
// plain ring of solutions/04_ring_allreduce/ring.cpp; bench_allreduce times
// the two side by side (bench/README.md says why pieces help).
#pragma once

#include <cstdint>

#include "dpt/comm.h"

namespace dpt_bench {

/// data (count,) becomes the sum (or mean) over ranks: scatter-reduce in
/// pieces of at most kPieceFloats, then a whole-chunk all-gather.
void pieced_ring_all_reduce(dpt::Communicator& comm, float* data, int64_t count, dpt::ReduceOp op);

/// 512 KiB: a received piece and the slice of data it is added to (1 MiB
/// together) stay in a core's L2 cache (1–2 MiB on current server cores),
/// while a piece is large enough that each message's handshake stays small.
constexpr int64_t kPieceFloats = 128 * 1024;

}  // namespace dpt_bench
