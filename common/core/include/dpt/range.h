/// @file range.h
/// @brief `Range`, a contiguous run of a flat vector's elements — a ring's
/// chunk (chapter 04), a ZeRO shard or layer (07), a block of a collective
/// (08), a server's shard (09) — and `mod`, the ring's index arithmetic.
///
///     Range last = ring_chunk(count, n, n - 1);            // a chunk, by index
///     comm.send(data + last.begin, last.size(), mod(r - 1, n));   // to the left neighbour
///
/// Left out: how a vector is cut into ranges; each chapter's contract says.
#pragma once

#include <cstdint>

namespace dpt {

/// Elements [begin, end) of a flat vector; begin <= end.
struct Range {
  int64_t begin = 0;  ///< first element
  int64_t end = 0;    ///< one past the last
  /// Number of elements (0 for an empty range).
  int64_t size() const { return end - begin; }
};

/// `a` modulo `n` in [0, n), for negative `a` too (C++'s `%` keeps a's sign):
/// the ring neighbour s places to the left of rank r is mod(r − s, n). n >= 1.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace dpt
