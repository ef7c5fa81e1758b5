/// @file sharded_ring.h
/// @brief Chapter 04's two ring phases, with the chunks ZeRO needs: chunk r is
/// whatever range rank r owns (shard_bounds in ch07.h), possibly empty, and it
/// ENDS on rank r. Chapter 04 cut a vector into near-equal chunks and let
/// chunk (r+1) mod n finish on rank r; ZeRO's owner is fixed by the partition,
/// so the ring starts one chunk later. Provided, not a hole. Not chapter 04's
/// phases under a rotation: those cut `count` into near-equal chunks, and a
/// bucket's chunks here are the partition's (a bucket inside one shard has a
/// single non-empty chunk); equal chunks padded to fit would send up to n−1
/// times the bytes. Nor do chapter 07's tests need chapter 04's holes.
///
/// Chunk r of `data` is [bounds[r], bounds[r+1]); bounds has comm.size()+1
/// non-decreasing entries, bounds[0] = 0. Only sendrecv with the neighbours:
/// each rank sends every chunk but one, so Σ over ranks = (n−1) · all chunks.
/// `data` may be host or GPU memory (the scratch and the adds follow it,
/// dpt/floats.h). A chunk r's bounds that are not N+1 non-decreasing offsets
/// from 0 are an error naming shard_bounds, where ch07's bounds come from.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"

namespace dpt::ch07 {

/// Afterwards chunk r of rank r's `data` holds the sum over ranks of chunk r
/// (other chunks hold partial sums). Every element of chunk r is summed in the
/// same order whatever the bounds: rank r+1's value first, rank r's last — so
/// a bucket and the whole buffer give the same bits.
void ring_reduce_scatter(Communicator& comm, float* data, const std::vector<int64_t>& bounds);

/// On entry rank r's chunk r is final; afterwards every chunk is, on every rank.
void ring_all_gather(Communicator& comm, float* data, const std::vector<int64_t>& bounds);

}  // namespace dpt::ch07
