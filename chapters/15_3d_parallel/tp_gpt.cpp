// tp_gpt.cpp — the split GPT: shares cut from the full model, the forward,
// and the shares put back together (tp_gpt.h).
#include "tp_gpt.h"

#include <algorithm>

#include "ch12.h"
#include "ch14.h"
#include "stage.h"
#include "dpt/check.h"
#include "dpt/memory_ledger.h"
#include "dpt/ops.h"
#include "exchange_pairs.h"
#include "slice_placement.h"

namespace dpt::ch15 {

std::string tp_shape_problem(const GptShape& shape, int tp) {
  if (shape.heads % tp == 0) return "";
  return "--tp " + std::to_string(tp) + " does not divide the " + std::to_string(shape.heads) +
         " heads (--heads): each rank computes an equal share of whole heads";
}

namespace {
Tensor leaf(const Tensor& host, Device& device) { return host.to(device).set_requires_grad(true); }

// Rows [begin, begin + count) of a (R, N) or (R) host tensor, on `device`.
Tensor row_block(const Tensor& full, int64_t begin, int64_t count, Device& device) {
  return leaf(full.rows(begin, begin + count).clone(), device);
}

// Columns [begin, begin + count) of a (R, N) host tensor, on `device`.
Tensor column_block(const Tensor& full, int64_t begin, int64_t count, Device& device) {
  const int64_t R = full.size(0), N = full.size(1);
  std::vector<float> out(std::size_t(R * count));
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < count; ++j) out[std::size_t(i * count + j)] = full.data()[i * N + begin + j];
  return leaf(Tensor::from_vector({R, count}, out, Device::host()), device);
}

// Every rank's share, as stored, on every rank: block t is rank t's.
std::vector<float> all_shares(Communicator& group, const Tensor& share) {
  const std::vector<float> mine = share.to_vector();
  std::vector<float> all(mine.size() * std::size_t(group.size()));
  group.all_gather(mine.data(), all.data(), int64_t(mine.size()));
  return all;
}

// Shares of rows (the MLP's c_fc): rank t's share is rows [t·r, (t+1)·r) of
// the full tensor. `width` is the row length (1 for a bias).
void put_rows(const std::vector<float>& all, int ranks, int64_t width, std::vector<float>& out) {
  const int64_t share = int64_t(all.size()) / ranks, R = share / width * ranks;
  const std::size_t base = out.size();
  out.resize(base + std::size_t(R * width));
  std::copy(all.begin(), all.begin() + R * width, out.begin() + std::ptrdiff_t(base));  // ranks' shares in rank order
}

// Shares of columns: rank t's share is (R, k), columns [t·k, (t+1)·k).
void put_columns(const std::vector<float>& all, int ranks, int64_t rows, std::vector<float>& out) {
  const int64_t k = int64_t(all.size()) / ranks / rows, N = k * ranks;
  const std::size_t base = out.size();
  out.resize(base + std::size_t(rows * N));
  for (int t = 0; t < ranks; ++t)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < k; ++j) out[base + std::size_t(i * N + t * k + j)] = all[std::size_t((t * rows + i) * k + j)];
}
}  // namespace

TensorParallelGpt::TensorParallelGpt(Communicator& group, const Gpt& full, Device& device, int stage, int stages)
    : group_(group), shape_(full.shape()), stage_(stage), stages_(stages) {
  const std::string problem = tp_shape_problem(shape_, group.size());
  DPT_CHECK(problem.empty(), problem);
  const int t = group.rank(), tp = group.size();
  const int64_t C = shape_.width, h = 4 * C / tp;  // rank t's MLP features [t·h, (t+1)·h)
  const ch13::LayerRange range = ch13::stage_layers(shape_.layers, stages, stage);
  first_layer_ = range.first;
  if (has_embeddings()) wte_ = leaf(full.wte, device), wpe_ = leaf(full.wpe, device);
  for (int l = range.first; l < range.last; ++l) {
    const GptBlock& b = full.blocks[std::size_t(l)];
    TpBlock mine;
    mine.ln_1_weight = leaf(b.ln_1_weight, device), mine.ln_1_bias = leaf(b.ln_1_bias, device);
    mine.attn = attention_slices(b, shape_, t, tp, device);  // your hole
    mine.ln_2_weight = leaf(b.ln_2_weight, device), mine.ln_2_bias = leaf(b.ln_2_bias, device);
    mine.fc_weight = row_block(b.fc_weight, t * h, h, device);
    mine.fc_bias = row_block(b.fc_bias, t * h, h, device);
    mine.mlp_proj_weight = column_block(b.mlp_proj_weight, t * h, h, device);
    mine.mlp_proj_bias = leaf(b.mlp_proj_bias, device);
    blocks_.push_back(mine);
  }
  if (!has_head()) return;
  ln_f_weight_ = leaf(full.ln_f_weight, device), ln_f_bias_ = leaf(full.ln_f_bias, device);
  lm_head_weight_ = leaf(full.lm_head_weight, device);
}

int64_t TensorParallelGpt::flat_offset() const {
  if (has_embeddings()) return 0;
  const int64_t C = shape_.width;
  return shape_.vocab * C + shape_.context * C + first_layer_ * (12 * C * C + 13 * C);  // wte, wpe, earlier blocks
}

Tensor TensorParallelGpt::stage_forward(const Tensor& input, const std::vector<int64_t>& inputs,
                                        const std::vector<int64_t>& targets, int64_t batch, bool sp) const {
  DPT_CHECK(has_embeddings() != input.defined(), "stage " << stage_ << ": an input activation "
                                                           << (has_embeddings() ? "on the first stage" : "missing"));
  Tensor x = has_embeddings() ? embed(inputs, batch, sp) : input;
  x = sp ? run_blocks_sp(x, batch) : run_blocks(x, batch);
  return has_head() ? head_loss(x, targets, batch, sp) : x;
}

Tensor TensorParallelGpt::loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets,
                               int64_t batch) const {
  DPT_CHECK(stages_ == 1, "loss(): the whole model, not stage " << stage_ << " of " << stages_);
  return stage_forward(Tensor(), inputs, targets, batch, false);
}

namespace {
// The embeddings, LayerNorms and residual adds are charged to Activations on
// the ledger (the region sequence parallelism splits: sp_gpt.cpp does the same).
MemoryScope residual_region() { return MemoryScope(MemoryCategory::Activations); }
}  // namespace

Tensor TensorParallelGpt::embed(const std::vector<int64_t>& inputs, int64_t batch, bool sp) const {
  if (sp) return embed_positions(inputs, batch);
  const int64_t n = int64_t(inputs.size()), time = n / batch;
  DPT_CHECK(batch > 0 && n % batch == 0 && time <= shape_.context,
            "tensor-parallel GPT: " << n << " tokens do not make " << batch << " sequences of at most " << shape_.context);
  std::vector<int64_t> positions(inputs.size());
  for (int64_t i = 0; i < n; ++i) positions[std::size_t(i)] = i % time;
  auto scope = residual_region();
  return add(embedding(wte_, inputs), embedding(wpe_, positions));  // (B·T, C), whole on every rank
}

Tensor TensorParallelGpt::run_blocks(Tensor x, int64_t batch) const {
  for (const TpBlock& b : blocks_) {
    Tensor h;
    {
      auto scope = residual_region();
      h = ch14::layer_norm(x, b.ln_1_weight, b.ln_1_bias);
    }
    Tensor a = tp_attention(group_, tensor_parallel_pair(group_), h, b.attn, shape_, batch);
    {
      auto scope = residual_region();
      x = add(x, a);
      h = ch14::layer_norm(x, b.ln_2_weight, b.ln_2_bias);
    }
    h = gelu(ch12::column_parallel_linear(group_, h, b.fc_weight, b.fc_bias));  // (B·T, 4C/tp): split
    Tensor m = ch12::row_parallel_linear(group_, h, b.mlp_proj_weight, b.mlp_proj_bias);
    auto scope = residual_region();
    x = add(x, m);
  }
  return x;
}

std::vector<Tensor> TensorParallelGpt::parameters() const {
  std::vector<Tensor> out;
  if (has_embeddings()) out = {wte_, wpe_};
  for (const TpBlock& b : blocks_)
    out.insert(out.end(), {b.ln_1_weight, b.ln_1_bias, b.attn.qkv_weight, b.attn.qkv_bias, b.attn.proj_weight,
                           b.attn.proj_bias, b.ln_2_weight, b.ln_2_bias, b.fc_weight, b.fc_bias, b.mlp_proj_weight,
                           b.mlp_proj_bias});
  if (has_head()) out.insert(out.end(), {ln_f_weight_, ln_f_bias_, lm_head_weight_});
  return out;
}

std::vector<Tensor> TensorParallelGpt::replicated_parameters() const {
  std::vector<Tensor> out;
  if (has_embeddings()) out = {wte_, wpe_};
  for (const TpBlock& b : blocks_)
    out.insert(out.end(), {b.ln_1_weight, b.ln_1_bias, b.attn.proj_bias, b.ln_2_weight, b.ln_2_bias, b.mlp_proj_bias});
  if (has_head()) out.insert(out.end(), {ln_f_weight_, ln_f_bias_, lm_head_weight_});
  return out;
}

std::vector<float> TensorParallelGpt::gather(bool grads) const {
  const int tp = group_.size();
  const int64_t C = shape_.width;
  auto of = [grads](const Tensor& p) {
    DPT_CHECK(!grads || p.grad().defined(), "a parameter of shape " << shape_str(p.shape())
                                                << " has no gradient after backward: the loss depends on it");
    return grads ? p.grad() : p;
  };
  std::vector<float> out;
  auto whole = [&](const Tensor& p) {  // replicated: this rank's copy
    const std::vector<float> v = of(p).to_vector();
    out.insert(out.end(), v.begin(), v.end());
  };
  if (has_embeddings()) whole(wte_), whole(wpe_);
  for (const TpBlock& b : blocks_) {
    whole(b.ln_1_weight), whole(b.ln_1_bias);
    gather_attention(group_, shape_, {of(b.attn.qkv_weight), of(b.attn.qkv_bias), of(b.attn.proj_weight)}, out);
    whole(b.attn.proj_bias), whole(b.ln_2_weight), whole(b.ln_2_bias);
    put_rows(all_shares(group_, of(b.fc_weight)), tp, C, out);
    put_rows(all_shares(group_, of(b.fc_bias)), tp, 1, out);
    put_columns(all_shares(group_, of(b.mlp_proj_weight)), tp, C, out);
    whole(b.mlp_proj_bias);
  }
  if (has_head()) whole(ln_f_weight_), whole(ln_f_bias_), whole(lm_head_weight_);
  return out;
}

}  // namespace dpt::ch15
