// sp_gpt.cpp — the split GPT run sequence parallel (tp_gpt.h,
// sequence_parallel.h): between the exchanges rank t holds T/tp positions.
#include "bias.h"
#include "ch14.h"
#include "dpt/check.h"
#include "dpt/memory_ledger.h"
#include "dpt/ops.h"
#include "exchange_pairs.h"
#include "sequence_parallel.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

namespace {
std::vector<int64_t> pick(const std::vector<int64_t>& all, const std::vector<int64_t>& rows) {
  std::vector<int64_t> out;
  for (int64_t r : rows) out.push_back(all[std::size_t(r)]);
  return out;
}
}  // namespace

Tensor TensorParallelGpt::sequence_parallel_loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets,
                                                 int64_t batch) const {
  DPT_CHECK(stages_ == 1, "sequence_parallel_loss(): the whole model, not stage " << stage_ << " of " << stages_);
  return stage_forward(Tensor(), inputs, targets, batch, true);
}

Tensor TensorParallelGpt::embed_positions(const std::vector<int64_t>& inputs, int64_t batch) const {
  const int tp = group_.size();
  const int64_t n = int64_t(inputs.size()), time = batch > 0 ? n / batch : 0;
  DPT_CHECK(batch > 0 && n % batch == 0 && time <= shape_.context && time % tp == 0,
            "sequence-parallel GPT: " << n << " tokens do not make " << batch << " sequences of at most "
                                      << shape_.context << ", a multiple of " << tp << " ranks");
  const std::vector<int64_t> rows = sequence_rows(batch, time, group_.rank(), tp);
  std::vector<int64_t> positions;
  for (int64_t r : rows) positions.push_back(r % time);
  auto scope = MemoryScope(MemoryCategory::Activations);  // as loss(): the ledger's region
  return add(embedding(wte_, pick(inputs, rows)), embedding(wpe_, positions));  // (B·T/tp, C): my positions only
}

Tensor TensorParallelGpt::run_blocks_sp(Tensor x, int64_t batch) const {
  auto region = [] { return MemoryScope(MemoryCategory::Activations); };
  for (const TpBlock& b : blocks_) {
    Tensor h;
    {
      auto scope = region();
      h = ch14::layer_norm(x, b.ln_1_weight, b.ln_1_bias);
    }
    Tensor a = tp_attention(group_, sequence_parallel_pair(group_, batch), h, b.attn, shape_, batch);
    {
      auto scope = region();
      x = add(x, a);
      h = ch14::layer_norm(x, b.ln_2_weight, b.ln_2_bias);
    }
    h = gelu(linear(gather_sequence(group_, h, batch), b.fc_weight, b.fc_bias));  // (B·T, 4C/tp)
    Tensor m = ch12::add_bias(scatter_sequence(group_, linear(h, b.mlp_proj_weight, Tensor()), batch), b.mlp_proj_bias);
    auto scope = region();
    x = add(x, m);
  }
  return x;
}

Tensor TensorParallelGpt::head_loss(Tensor x, const std::vector<int64_t>& targets, int64_t batch, bool sp) const {
  const int tp = group_.size();
  const int64_t n = int64_t(targets.size());
  DPT_CHECK(batch > 0 && n % batch == 0 && x.size(0) * (sp ? tp : 1) == n,
            "the head: " << n << " targets for " << x.size(0) << " rows of the residual stream");
  {
    auto scope = MemoryScope(MemoryCategory::Activations);
    x = ch14::layer_norm(x, ln_f_weight_, ln_f_bias_);
  }
  if (!sp) return softmax_cross_entropy(linear(x, lm_head_weight_, Tensor()), targets);
  // The mean over my B·T/tp positions ÷ tp = their share of the mean over B·T.
  const std::vector<int64_t> rows = sequence_rows(batch, n / batch, group_.rank(), tp);
  return scale(softmax_cross_entropy(linear(x, lm_head_weight_, Tensor()), pick(targets, rows)), 1.0f / float(tp));
}

}  // namespace dpt::ch15
