/// @file topk_select.h
/// @brief Top-k's selection (provided, not a hole): which K entries of a
/// gradient have the largest |x|, found by a threshold, not by sorting.
///
/// A sort costs Ψ log Ψ comparisons (a partial sort Ψ log K) through an index
/// array; the selection needs only the K-th largest |x|, the threshold t:
/// every entry above t is sent, and so are as many entries equal to t as K
/// still lacks, the lowest indices first. For floats that are not NaN the
/// order of |x|'s bit patterns is the order of the magnitudes, so the work is
/// on 31-bit integer keys:
///   1. a strided sample of ~4096 keys, and std::nth_element on it, gives a
///      lower bound t_lo that a little more than K keys pass;
///   2. one pass over the keys (vector code) marks those >= t_lo in a bit mask
///      and counts them; fewer than K means the sample misled: t_lo is
///      lowered and the pass repeated (at worst t_lo = 0 marks every key);
///   3. among the marked few, std::nth_element finds t exactly.
///
/// Left out: NaN is ranked above inf (its bits are larger), so a NaN gradient
/// is sent rather than silently dropped; parallel passes.
#pragma once

#include <cstdint>
#include <vector>

namespace dpt::ch10 {

/// The indices of the `k` entries of `x` of largest |x|, a tie going to the
/// lower index, in increasing order. Requires 0 <= k <= x.size().
std::vector<int64_t> top_k_indices(const std::vector<float>& x, int64_t k);

}  // namespace dpt::ch10
