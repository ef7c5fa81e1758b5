/// @file gpt.h
/// @brief GPT as nanoGPT writes it: token and position embeddings, pre-LN
/// blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x))), a final LayerNorm and
/// an untied `lm_head`; biases everywhere but the head, GELU (tanh form), no
/// dropout, LayerNorm ε 1e-5.
///
///     dpt::Rng rng(42);
///     Gpt model({/*vocab*/ 65, /*context*/ 64, /*layers*/ 4, /*heads*/ 4, /*width*/ 128}, device, rng);
///     dpt::Tensor logits = model.forward(tokens, batch);   // tokens B·T → (B·T, V)
///
/// Tensors are named and shaped as nanoGPT's `model.py` names them
/// (`transformer.h.0.attn.c_attn.weight`, (3C, C), q, k and v stacked), so
/// saved weights load into nanoGPT, and PyTorch's model loads ours.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/nn.h"
#include "dpt/tensor.h"

/// The sizes of a GPT. C = width, T = context, L = layers, H = heads, V = vocab.
struct GptShape {
  int64_t vocab = 0;     ///< V, characters in the vocabulary
  int64_t context = 64;  ///< T, the longest sequence (learned positions)
  int64_t layers = 4;    ///< L, transformer blocks
  int64_t heads = 4;     ///< H, attention heads per block
  int64_t width = 128;   ///< C, the residual stream's width
  /// C / H, each head's size.
  int64_t head_size() const { return width / heads; }
};

/// One block's parameters (nanoGPT's `transformer.h.{i}`).
struct GptBlock {
  dpt::Tensor ln_1_weight;       ///< ln_1: (C)
  dpt::Tensor ln_1_bias;         ///< ln_1: (C)
  dpt::Tensor attn_weight;       ///< c_attn: (3C, C); q, k, v in that order
  dpt::Tensor attn_bias;         ///< c_attn: (3C)
  dpt::Tensor attn_proj_weight;  ///< attn.c_proj: (C, C)
  dpt::Tensor attn_proj_bias;    ///< attn.c_proj: (C)
  dpt::Tensor ln_2_weight;       ///< ln_2: (C)
  dpt::Tensor ln_2_bias;         ///< ln_2: (C)
  dpt::Tensor fc_weight;         ///< mlp.c_fc: (4C, C)
  dpt::Tensor fc_bias;           ///< mlp.c_fc: (4C)
  dpt::Tensor mlp_proj_weight;   ///< mlp.c_proj: (C, 4C)
  dpt::Tensor mlp_proj_bias;     ///< mlp.c_proj: (C)
};

/// The model. Parameters are public handles, listed by named_parameters()
/// in nanoGPT's state_dict order.
class Gpt {
 public:
  /// Initialised as nanoGPT does: weights N(0, 0.02), the two c_proj
  /// weights N(0, 0.02/√(2L)), biases 0, LayerNorms weight 1 and bias 0;
  /// drawn on the host from `rng` in named_parameters() order, then copied to `device`.
  Gpt(const GptShape& shape, dpt::Device& device, dpt::Rng& rng);

  /// tokens: `batch` sequences of `time` ≤ T tokens each, row-major (B·T) →
  /// logits (B·T, V).
  dpt::Tensor forward(const std::vector<int64_t>& tokens, int64_t batch) const;
  /// Mean cross-entropy of forward(inputs) against targets (B·T each), a scalar in nats.
  dpt::Tensor loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets,
                   int64_t batch) const;

  /// nanoGPT's names and shapes, state_dict order.
  std::vector<dpt::NamedTensor> named_parameters() const;
  /// The tensors of named_parameters(), same order.
  std::vector<dpt::Tensor> parameters() const;
  /// Total parameter elements (what gpt_parameter_count says for shape()).
  int64_t num_parameters() const;
  /// The sizes it was built with.
  const GptShape& shape() const { return shape_; }

  dpt::Tensor wte;                 ///< (V, C) token embedding
  dpt::Tensor wpe;                 ///< (T, C) position embedding
  std::vector<GptBlock> blocks;    ///< L blocks
  dpt::Tensor ln_f_weight;         ///< (C) the final LayerNorm's scale
  dpt::Tensor ln_f_bias;           ///< (C) the final LayerNorm's shift
  dpt::Tensor lm_head_weight;      ///< (V, C), no bias, not tied to wte

 private:
  GptShape shape_;
};

/// One block's causal self-attention (ch14::causal_attention on its heads) on x (B·T, C), the block's ln_1 already
/// applied: (B·T, C), before the residual add.
dpt::Tensor gpt_attention(const dpt::Tensor& x, const GptBlock& block, const GptShape& shape, int64_t batch);

/// The parameter count written out from the shape:
/// 12·L·C² + 13·L·C (blocks) + V·C + T·C (embeddings) + 2·C (ln_f) + V·C (head).
int64_t gpt_parameter_count(const GptShape& shape);

/// The shape's sizes as one line: "4 layers × 4 heads, width 128, context 64, vocabulary 65".
std::string describe(const GptShape& shape);
