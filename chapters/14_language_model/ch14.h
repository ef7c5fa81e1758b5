/// @file ch14.h
/// @brief Chapter 14's holes, each specified once: causal self-attention
/// (what a position may read, and how much of it), LayerNorm's backward
/// (the gradient of a normalization, derived), and the sampling loop that
/// makes the trained model write.
///
/// Fill them in `exercises/14_language_model/`; tiered hints are in
/// \ref ch14_hints. `ctest --preset student -L ch14` checks them against
/// definitions written out as loops, finite differences and the core's own
/// op; `ch14_language_model` prints ✔/✘ verdicts for them before it trains.
///
/// Words used below. A *sequence* is T tokens, positions 0 … T−1; position i
/// predicts token i + 1, so it may use what positions 0 … i hold and nothing
/// later (*causal*). *Rows* of a tensor (…, C) are its vectors along the last
/// axis.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt::ch14 {

// ----------------------------------------------------------------------------
// attention

/// Causal self-attention, every head of every sequence at once.
///
/// On entry: q, k and v are (G, T, D) on one device (G = batch × heads; for
/// head g, row i of q is position i's query, row j of k and v position j's
/// key and value). Any of them may require grad.
///
/// Postconditions: returns y (G, T, D); for every g and i, y[g, i] is a
/// convex combination Σ_j w_ij · v[g, j] of the value rows (w_ij ≥ 0,
/// Σ_j w_ij = 1), and the weights obey three laws:
///  - causal: w_ij = 0 for every j > i, so changing q, k or v at positions
///    after i leaves y[g, i] unchanged;
///  - matched: position i's weights depend on its own query and the keys it
///    reads, through the match ⟨q[g, i], k[g, j]⟩ alone: their log-odds,
///    ln(w_ij / w_ij') for any j, j' ≤ i, is a fixed positive multiple of
///    the difference of the two matches (a better match, more weight); the
///    one multiple that makes the scores (the log-weights, up to a constant
///    per i) have variance 1 when the entries of q and k are independent
///    with mean 0 and variance 1, whatever D is (why: \ref ch14_attention);
///  - differentiable: backward of a loss of y delivers d loss / d q, k, v.
/// (Hole: exercises/14_language_model/attention.cpp.)
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

// ----------------------------------------------------------------------------
// LayerNorm

/// What LayerNorm's forward keeps for its backward: per row r of x (rows, C),
/// mean[r] = (1/C) Σ_j x[r, j] and rstd[r] = 1 / √(var[r] + ε), var the biased
/// variance (1/C) Σ_j (x[r, j] − mean[r])². Host tensors of shape (rows).
struct LayerNormSaved {
  Tensor mean;  ///< (rows) per-row mean
  Tensor rstd;  ///< (rows) per-row 1 / √(variance + ε)
};

/// The gradients LayerNorm's backward returns, each of its input's shape.
struct LayerNormGradients {
  Tensor dx;       ///< (rows, C)
  Tensor dweight;  ///< (C)
  Tensor dbias;    ///< (C)
};

/// The backward of y = x̂ ⊙ weight + bias, x̂[r, j] = (x[r, j] − mean[r]) ·
/// rstd[r] (layer_norm(), given below, is the forward; dpt::layer_norm is the
/// same function).
///
/// On entry: dout and x are (rows, C), weight (C), `saved` what the forward
/// kept for this x; all on the host (layer_norm() moves them there).
///
/// Postconditions: three host tensors of their inputs' shapes, for the loss
/// L = Σ dout ⊙ y: dx = ∂L/∂x (mean and rstd depend on x too), dweight =
/// ∂L/∂weight and dbias = ∂L/∂bias (weight and bias are shared by every row).
/// They equal finite differences of the forward to float rounding.
/// (Hole: exercises/14_language_model/layer_norm.cpp.)
LayerNormGradients layer_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                       const LayerNormSaved& saved);

/// The chapter's LayerNorm op, given: x (…, C) normalized per row, then
/// · weight (C) + bias (C), ε inside the square root; its backward calls
/// layer_norm_backward on host copies and moves the gradients to x's device.
/// The GPT uses it in every block and before its head.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

// ----------------------------------------------------------------------------
// sampling

/// A language model as generate() sees it: one sequence of n tokens
/// (1 ≤ n ≤ the model's context) → logits (n, V) on any device, row i the
/// unnormalized log-probabilities of the token after tokens[0 … i]. Asked
/// for more than its context, it throws dpt::Error.
using NextTokenScores = std::function<Tensor(const std::vector<int64_t>& tokens)>;

/// Text from a model, one token at a time.
///
/// On entry: `prompt` not empty, each token in [0, V); `context` ≥ 1 is the
/// most tokens `model` accepts; count ≥ 0; temperature τ > 0 (else dpt::Error).
///
/// Postconditions: returns `prompt`, unchanged, followed by `count` new
/// tokens. Given every token before it, each new token is distributed as
/// the model's prediction of it, tempered: P(v) ∝ p(v)^(1/τ), p the
/// probabilities the model gives that token after seeing as much as it can
/// of what precedes it. τ = 1 samples the model as trained, τ → 0 gives its
/// most likely token, τ → ∞ the uniform distribution. `model` is never asked
/// for more than `context` tokens, however long the prompt; the only
/// randomness is `rng`'s, so one seed gives one text.
/// (Hole: exercises/14_language_model/sample.cpp.)
std::vector<int64_t> generate(const NextTokenScores& model, int64_t context, const std::vector<int64_t>& prompt,
                              int64_t count, float temperature, Rng& rng);

}  // namespace dpt::ch14
