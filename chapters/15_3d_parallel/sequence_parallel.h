/// @file sequence_parallel.h
/// @brief Megatron's sequence parallelism on top of the tensor-parallel GPT:
/// between the blocks' split layers (the LayerNorms, the residual adds, the
/// embeddings and the head) rank t holds only its T/tp positions of every
/// sequence, so those activations take 1/tp of the memory. The split layers
/// still need every position: f and g change what they take and give (your
/// gather_sequence and scatter_sequence, ch15.h).
/// Attention runs your tp_attention on this pair (exchange_pairs.h); the MLP:
///
///     x_t ─ ln_1 ─ tp_attention ─ + ─ ln_2 ─ gather_sequence ─ c_fc ─ gelu ─ c_proj ─ scatter_sequence ─ +bias ─ +
///
/// The ring moves the same bytes as tensor parallelism alone (a verdict);
/// what changes is what each rank keeps between the exchanges.
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

#include "ch15.h"
#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch15 {

// The pair itself, gather_sequence and scatter_sequence, is your hole (ch15.h).

/// The order collectives move rows in: a (B·T, C) tensor's rows regrouped
/// rank by rank — rank 0's positions of every sequence, then rank 1's, … —
/// as a host vector (tp blocks of B·T/tp·C floats).
std::vector<float> rank_major(const Tensor& whole, int64_t batch, int tp);

/// The inverse: tp blocks of B·T/tp·C floats, rank by rank, back to the
/// (B·T, C) tensor's own row order, on `device`.
Tensor sequence_major(const std::vector<float>& blocks, int64_t batch, int64_t width, int tp, Device& device);

/// The indices in [0, B·T) of rank t's rows (positions [t·T/tp, (t+1)·T/tp)
/// of each sequence), in order.
std::vector<int64_t> sequence_rows(int64_t batch, int64_t time, int t, int tp);

}  // namespace dpt::ch15
