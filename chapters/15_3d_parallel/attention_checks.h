/// @file attention_checks.h
/// @brief The bare run's verdicts on the attention hole, before any step:
/// attention_slices' laws (ch15.h) and a probe of tp_attention, both on a
/// small random block with non-zero biases (nanoGPT starts its biases at
/// 0, which would hide a bias added on every rank). Each verdict names one
/// property, in the hole's words, so a mistake is reported here and not by
/// the step check after it.
///
/// The oracle is chapter 14's gpt_attention on one device; where each
/// share's entries belong is read back from attention_slices itself
/// (slice_placement.h), so any layout the laws allow passes.
#pragma once

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"
#include "gpt.h"

namespace dpt::ch15 {

/// The probe's block: the run's heads (so the group divides them), head
/// size 3, context 5; B = 2 sequences.
GptShape probe_shape(const GptShape& run_shape);

/// Collective over the world: attention_slices' three laws for the TP
/// group's ranks (copies of the right tensors; every entry on exactly one
/// rank; a rank's entries alone compute its heads' share), judged on rank 0.
/// True on every rank when all held.
bool add_slice_verdicts(Context& ctx, Communicator& tp_group, const GptShape& run_shape, Verdicts& v);

/// Collective over the world: tp_attention on chapter 12's pair against one
/// device — forward; x's gradient; c_attn's shares' gradients; c_proj's —
/// and its exchanges against the contract (one all-reduce of B·T·C floats
/// each way), one verdict each, judged on rank 0. Throws NotImplemented
/// (every rank, before any exchange) while tp_attention is a hole. True on
/// every rank when all held.
bool add_attention_probe_verdicts(Context& ctx, Communicator& tp_group, const GptShape& run_shape, Verdicts& v);

}  // namespace dpt::ch15
