// gpt.cpp — the model: parameters in nanoGPT's order, the forward pass.
#include "gpt.h"

#include <cmath>
#include <sstream>

#include "ch14.h"
#include "dpt/check.h"
#include "dpt/ops.h"

using dpt::Tensor;

namespace {
Tensor normal(const dpt::Shape& shape, float std, dpt::Device& device, dpt::Rng& rng) {
  std::vector<float> values(static_cast<std::size_t>(dpt::shape_numel(shape)));
  for (float& v : values) v = std * rng.normal();
  return Tensor::from_vector(shape, values, device).set_requires_grad(true);
}
Tensor constant(const dpt::Shape& shape, float value, dpt::Device& device) {
  return Tensor::full(shape, value, device).set_requires_grad(true);
}
}  // namespace

Gpt::Gpt(const GptShape& shape, dpt::Device& device, dpt::Rng& rng) : shape_(shape) {
  const int64_t V = shape.vocab, T = shape.context, C = shape.width, L = shape.layers;
  DPT_CHECK(V > 0 && T > 0 && C > 0 && L > 0 && shape.heads > 0, "GPT: every size must be positive (" << describe(shape) << ")");
  DPT_CHECK(C % shape.heads == 0, "GPT: width " << C << " is not a multiple of " << shape.heads << " heads");
  const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * float(L));
  wte = normal({V, C}, std, device, rng);
  wpe = normal({T, C}, std, device, rng);
  for (int64_t l = 0; l < L; ++l) {
    GptBlock b;
    b.ln_1_weight = constant({C}, 1.0f, device);
    b.ln_1_bias = constant({C}, 0.0f, device);
    b.attn_weight = normal({3 * C, C}, std, device, rng);
    b.attn_bias = constant({3 * C}, 0.0f, device);
    b.attn_proj_weight = normal({C, C}, proj_std, device, rng);
    b.attn_proj_bias = constant({C}, 0.0f, device);
    b.ln_2_weight = constant({C}, 1.0f, device);
    b.ln_2_bias = constant({C}, 0.0f, device);
    b.fc_weight = normal({4 * C, C}, std, device, rng);
    b.fc_bias = constant({4 * C}, 0.0f, device);
    b.mlp_proj_weight = normal({C, 4 * C}, proj_std, device, rng);
    b.mlp_proj_bias = constant({C}, 0.0f, device);
    blocks.push_back(b);
  }
  ln_f_weight = constant({C}, 1.0f, device);
  ln_f_bias = constant({C}, 0.0f, device);
  lm_head_weight = normal({V, C}, std, device, rng);
}

Tensor gpt_attention(const Tensor& x, const GptBlock& block, const GptShape& shape, int64_t batch) {
  const int64_t C = shape.width, H = shape.heads, D = shape.head_size();
  const int64_t T = x.size(0) / batch;
  Tensor qkv = dpt::linear(x, block.attn_weight, block.attn_bias);  // (B·T, 3C)
  auto heads = [&](int64_t which) {  // q, k or v as (B·H, T, D)
    Tensor part = dpt::reshape(dpt::columns(qkv, which * C, C), {batch, T, H, D});
    return dpt::reshape(dpt::swap_axes_12(part), {batch * H, T, D});
  };
  Tensor y = dpt::ch14::causal_attention(heads(0), heads(1), heads(2));  // (B·H, T, D): your hole
  y = dpt::reshape(dpt::swap_axes_12(dpt::reshape(y, {batch, H, T, D})), {batch * T, C});
  return dpt::linear(y, block.attn_proj_weight, block.attn_proj_bias);
}

Tensor Gpt::forward(const std::vector<int64_t>& tokens, int64_t batch) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  DPT_CHECK(batch > 0 && n % batch == 0 && n > 0,
            "GPT forward: " << n << " tokens do not make " << batch << " sequences of equal length");
  const int64_t time = n / batch;
  DPT_CHECK(time <= shape_.context, "GPT forward: sequences of " << time << " tokens exceed the context of "
                                                                 << shape_.context);
  std::vector<int64_t> positions(tokens.size());
  for (int64_t i = 0; i < n; ++i) positions[std::size_t(i)] = i % time;
  Tensor x = dpt::add(dpt::embedding(wte, tokens), dpt::embedding(wpe, positions));  // (B·T, C)
  for (const GptBlock& b : blocks) {
    x = dpt::add(x, gpt_attention(dpt::ch14::layer_norm(x, b.ln_1_weight, b.ln_1_bias), b, shape_, batch));
    Tensor h = dpt::ch14::layer_norm(x, b.ln_2_weight, b.ln_2_bias);
    h = dpt::gelu(dpt::linear(h, b.fc_weight, b.fc_bias));
    x = dpt::add(x, dpt::linear(h, b.mlp_proj_weight, b.mlp_proj_bias));
  }
  x = dpt::ch14::layer_norm(x, ln_f_weight, ln_f_bias);
  return dpt::linear(x, lm_head_weight, Tensor());
}

Tensor Gpt::loss(const std::vector<int64_t>& inputs, const std::vector<int64_t>& targets, int64_t batch) const {
  DPT_CHECK(inputs.size() == targets.size(),
            "GPT loss: " << inputs.size() << " inputs but " << targets.size() << " targets");
  return dpt::softmax_cross_entropy(forward(inputs, batch), targets);
}

std::vector<dpt::NamedTensor> Gpt::named_parameters() const {
  std::vector<dpt::NamedTensor> out{{"transformer.wte.weight", wte}, {"transformer.wpe.weight", wpe}};
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    const GptBlock& b = blocks[l];
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    out.insert(out.end(), {{p + "ln_1.weight", b.ln_1_weight},
                           {p + "ln_1.bias", b.ln_1_bias},
                           {p + "attn.c_attn.weight", b.attn_weight},
                           {p + "attn.c_attn.bias", b.attn_bias},
                           {p + "attn.c_proj.weight", b.attn_proj_weight},
                           {p + "attn.c_proj.bias", b.attn_proj_bias},
                           {p + "ln_2.weight", b.ln_2_weight},
                           {p + "ln_2.bias", b.ln_2_bias},
                           {p + "mlp.c_fc.weight", b.fc_weight},
                           {p + "mlp.c_fc.bias", b.fc_bias},
                           {p + "mlp.c_proj.weight", b.mlp_proj_weight},
                           {p + "mlp.c_proj.bias", b.mlp_proj_bias}});
  }
  out.insert(out.end(), {{"transformer.ln_f.weight", ln_f_weight},
                         {"transformer.ln_f.bias", ln_f_bias},
                         {"lm_head.weight", lm_head_weight}});
  return out;
}

std::vector<Tensor> Gpt::parameters() const {
  std::vector<Tensor> out;
  for (auto& named : named_parameters()) out.push_back(named.tensor);
  return out;
}

int64_t Gpt::num_parameters() const {
  int64_t total = 0;
  for (auto& named : named_parameters()) total += named.tensor.numel();
  return total;
}

int64_t gpt_parameter_count(const GptShape& s) {
  const int64_t C = s.width, L = s.layers, V = s.vocab, T = s.context;
  return 12 * L * C * C + 13 * L * C + V * C + T * C + 2 * C + V * C;
}

std::string describe(const GptShape& s) {
  std::ostringstream out;
  out << s.layers << " layers × " << s.heads << " heads, width " << s.width << ", context " << s.context
      << ", vocabulary " << s.vocab;
  return out.str();
}
