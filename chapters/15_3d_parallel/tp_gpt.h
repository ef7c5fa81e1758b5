/// @file tp_gpt.h
/// @brief Chapter 14's GPT with every block split over a tensor-parallel
/// group, Megatron's way: rank t holds the heads [t·H/tp, (t+1)·H/tp) of
/// each attention (the hole, ch15.h) and the block [t·4C/tp, (t+1)·4C/tp) of
/// each MLP's hidden features (c_fc column-parallel, c_proj row-parallel:
/// chapter 12's pair).
///
///     x ─ ln_1 ─ tp_attention (your hole) ─ + ─ ln_2 ─ f ─ c_fc(rows of t) ─ gelu ─ c_proj(cols of t) ─ g ─ +
///
/// Replicated on every rank of the group: the embeddings (wte, wpe), the
/// LayerNorms, the residual stream, ln_f and lm_head. The residual stream
/// is whole on every rank between the blocks' exchanges, so LayerNorm and the
/// residual adds need nothing from the other ranks; the head over a
/// vocabulary of ~65 characters is a sliver of the model (split, its
/// softmax would need a third exchange: Megatron's vocabulary-parallel
/// cross-entropy, for vocabularies of 50 000).
///
/// With --sp the same shares run sequence parallel (sequence_parallel.h,
/// sp_gpt.cpp). With --pp each pipeline stage holds a run of the blocks
/// (chapter 13's stage_layers split), the embeddings on the first stage,
/// ln_f and lm_head (untied, as chapter 14's) on the last; stage_forward runs
/// one stage's part (pipeline_gpt.h drives the stages).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch15.h"
#include "dpt/comm.h"
#include "gpt.h"

namespace dpt::ch15 {

/// "" when `tp` ranks can split `shape` (tp divides the heads, hence the
/// width and the MLP's 4C), else the sentence why not, naming --tp.
std::string tp_shape_problem(const GptShape& shape, int tp);

/// One block as rank t holds it.
struct TpBlock {
  Tensor ln_1_weight;                ///< (C), replicated
  Tensor ln_1_bias;                  ///< (C), replicated
  AttentionSlices attn;              ///< rank t's heads (ch15.h)
  Tensor ln_2_weight;                ///< (C), replicated
  Tensor ln_2_bias;                  ///< (C), replicated
  Tensor fc_weight;                  ///< (4C/tp, C): rows [t·4C/tp, (t+1)·4C/tp) of mlp.c_fc
  Tensor fc_bias;                    ///< (4C/tp): the same entries of its bias
  Tensor mlp_proj_weight;            ///< (C, 4C/tp): the matching columns of mlp.c_proj
  Tensor mlp_proj_bias;              ///< (C), replicated
};

/// This rank's share of a GPT, and the forward that joins the shares.
class TensorParallelGpt {
 public:
  /// group.rank()'s share of `full` (on the host) on `device`: of the whole
  /// model, or of pipeline stage `stage` of `stages` (chapter 13's split).
  TensorParallelGpt(Communicator& group, const Gpt& full, Device& device, int stage = 0, int stages = 1);
  /// One stage's forward on B = `batch` sequences (collective over the
  /// group). `input`: the residual stream from the stage before — (B·T, C),
  /// or with `sp` this rank's positions (B·T/tp, C); undefined on the first
  /// stage, which embeds `inputs`. Returns the residual stream after the
  /// stage's blocks, held alike, or on the last stage the loss (with `sp`,
  /// this rank's share, as sequence_parallel_loss).
  Tensor stage_forward(const Tensor& input, const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets,
                       int64_t batch, bool sp) const;
  /// Whether this share holds the embeddings (the first stage) / the head (the last).
  bool has_embeddings() const { return stage_ == 0; }
  bool has_head() const { return stage_ + 1 == stages_; }  ///< ln_f and lm_head: the last stage
  int stage() const { return stage_; }    ///< this share's pipeline stage
  int stages() const { return stages_; }  ///< the pipeline's stages
  int first_layer() const { return first_layer_; }  ///< the model's index of this stage's first block
  /// Where this stage's parameters start in the whole model's flat
  /// named_parameters() order (the stages' parts follow one another).
  int64_t flat_offset() const;
  /// Mean cross-entropy over B·T tokens (chapter 14's Gpt::loss), the same
  /// on every rank of the group. Collective over the group. One stage only.
  Tensor loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets, int64_t batch) const;
  /// Sequence parallel (sequence_parallel.h; defined in sp_gpt.cpp): this
  /// rank's share of the mean cross-entropy over B·T tokens — its T/tp
  /// positions of each sequence, ÷ (B·T) — so the group's shares sum to
  /// loss(). Collective over the group (the sequence pair's exchanges, 4
  /// per block each way). After backward the replicated parameters hold
  /// only this rank's positions' gradient: sum them over the group.
  /// The sequence length must divide by the group's size. One stage only.
  Tensor sequence_parallel_loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets,
                                int64_t batch) const;
  /// The tensors of this stage every rank of the group holds whole, in
  /// parameters() order.
  std::vector<Tensor> replicated_parameters() const;
  /// This rank's tensors (of its stage), in the full model's
  /// named_parameters() order.
  std::vector<Tensor> parameters() const;
  /// Collective over the group: the values (or, `grads`, the gradients) of
  /// this stage's part of the model (all of it with one stage) flattened in
  /// named_parameters() order, on every rank. Attention's shares are put
  /// back where your attention_slices puts each entry (read back from it:
  /// slice_placement.h), the MLP's by this file.
  std::vector<float> gather(bool grads) const;
  /// This rank's blocks (its stage's).
  const std::vector<TpBlock>& blocks() const { return blocks_; }
  /// The full model's sizes.
  const GptShape& shape() const { return shape_; }
  /// The TP group the share talks in.
  Communicator& group() const { return group_; }

 private:
  // The stage's pieces; `sp`: this rank's positions only (sp_gpt.cpp).
  Tensor embed(const std::vector<int64_t>& inputs, int64_t batch, bool sp) const;
  Tensor embed_positions(const std::vector<int64_t>& inputs, int64_t batch) const;
  Tensor run_blocks(Tensor x, int64_t batch) const;
  Tensor run_blocks_sp(Tensor x, int64_t batch) const;
  Tensor head_loss(Tensor x, const std::vector<int64_t>& targets, int64_t batch, bool sp) const;

  Communicator& group_;
  GptShape shape_;
  int stage_ = 0, stages_ = 1, first_layer_ = 0;
  Tensor wte_, wpe_, ln_f_weight_, ln_f_bias_, lm_head_weight_;
  std::vector<TpBlock> blocks_;
};

}  // namespace dpt::ch15
