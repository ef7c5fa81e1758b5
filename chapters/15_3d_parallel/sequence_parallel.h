/// @file sequence_parallel.h
/// @brief Megatron's sequence parallelism on top of the tensor-parallel GPT:
/// between the blocks' split layers (the LayerNorms, the residual adds, the
/// embeddings and the head) rank t holds only its T/tp positions of every
/// sequence, so those activations take 1/tp of the memory. The split layers
/// still need every position: g (after c_proj) becomes a reduce-scatter
/// along the sequence, f (before c_attn, c_fc) an all-gather — the conjugate
/// pair, each the other's backward.
///
///     x_t ─ ln_1 ─ AG ─ c_attn … c_proj ─ RS ─ +bias ─ + ─ ln_2 ─ AG ─ c_fc ─ gelu ─ c_proj ─ RS ─ +bias ─ +
///
/// An all-reduce is a reduce-scatter then an all-gather, so the ring moves
/// the same bytes as tensor parallelism alone; what changes is what each
/// rank keeps between the exchanges.
///
/// Rank t's rows: positions [t·T/tp, (t+1)·T/tp) of each of the B sequences,
/// sequence by sequence ((B·T/tp, C), the whole tensor's row order kept).
/// The ends stay sequence-local too: rank t embeds only its tokens and
/// scores only its positions (its share of the loss), so no activation
/// crosses the group outside the blocks. The price: every replicated
/// parameter (embeddings, LayerNorms, the c_proj biases, the head) gets
/// from each rank the gradient of its positions only, summed over the group
/// once after backward (Megatron does the same for its LayerNorms).
///
/// Left out: vocabulary-parallel embedding and head, dropout.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch15 {

/// The all-gather of the pair (Megatron's f under sequence parallelism):
/// from rank t's positions `mine` (B·T/tp, C) to the whole (B·T, C), the
/// same on every rank; backward: a reduce-scatter of the whole gradient
/// (each rank's split layers contributed their share of every position's)
/// back to rank t's positions. Collective over `group`.
Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch);

/// The reduce-scatter of the pair (Megatron's g): from rank t's partial sum
/// (B·T, C) of a row-parallel layer's output to rank t's positions of the
/// sum over the group (B·T/tp, C); backward: an all-gather of the positions'
/// gradients, so every rank's partial gets the whole one. Collective.
Tensor scatter_sequence(Communicator& group, const Tensor& partial, int64_t batch);

/// The indices in [0, B·T) of rank t's rows (positions [t·T/tp, (t+1)·T/tp)
/// of each sequence), in order.
std::vector<int64_t> sequence_rows(int64_t batch, int64_t time, int t, int tp);

}  // namespace dpt::ch15
