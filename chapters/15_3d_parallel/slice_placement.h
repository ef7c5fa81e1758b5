/// @file slice_placement.h
/// @brief Where your attention_slices put each entry, read back from the
/// function itself: it is called on a block whose every entry holds its own
/// index, so no provided file states a layout. The gathered model, the
/// bare run's verdicts and the probe of tp_attention all read it.
///
/// The index space is one block's attention parameters in
/// named_parameters() order: c_attn.weight's 3C² entries (row-major), then
/// c_attn.bias's 3C, c_proj.weight's C², c_proj.bias's C.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "gpt.h"

namespace dpt::ch15 {

/// One rank's shares, entry by entry (each tensor's flat order): the index
/// in the block's attention parameters that entry holds, or -1 where it
/// holds no entry's value unchanged.
struct SlicePlacement {
  std::vector<int64_t> qkv_weight;   ///< for each entry of the rank's c_attn weight share
  std::vector<int64_t> qkv_bias;     ///< for each entry of its c_attn bias share
  std::vector<int64_t> proj_weight;  ///< for each entry of its c_proj weight share
  std::vector<int64_t> proj_bias;    ///< for each entry of its c_proj bias
};

/// 4C² + 4C: the entries of one block's c_attn and c_proj.
int64_t attention_entries(const GptShape& shape);

/// Where the first and one past the last index of each tensor lie:
/// c_attn.weight [0, 3C²), c_attn.bias, c_proj.weight, c_proj.bias after.
struct AttentionRanges {
  int64_t qkv_weight = 0;   ///< c_attn.weight's first index
  int64_t qkv_bias = 0;     ///< c_attn.bias's first index
  int64_t proj_weight = 0;  ///< c_proj.weight's first index
  int64_t proj_bias = 0;    ///< c_proj.bias's first index
  int64_t end = 0;          ///< one past the last: attention_entries(shape)
};
/// The ranges of `shape`'s block.
AttentionRanges attention_ranges(const GptShape& shape);

/// attention_slices(t, tp) on the host, called on a block whose entries are
/// their indices (+1, so a 0 is no entry), read back. Throws what
/// attention_slices throws (NotImplemented while it is a hole); dpt::Error
/// when C is too wide for a float to hold every index exactly (C > 2046).
SlicePlacement slice_placement(const GptShape& shape, int t, int tp);

/// Collective over `group`: one block's c_attn.weight, c_attn.bias and
/// c_proj.weight (3C² + 3C + C² floats, in that order) appended to `out`,
/// put back from every rank's `shares` ({qkv_weight, qkv_bias,
/// proj_weight}, or their gradients) where slice_placement says each entry
/// went. An entry no share holds is NaN.
void gather_attention(Communicator& group, const GptShape& shape, const std::vector<Tensor>& shares,
                      std::vector<float>& out);

}  // namespace dpt::ch15
