// transformer_ops_dump.cpp — chapter 14's ops run by dpt on the CPU, their
// inputs, outputs and gradients written to one safetensors file for
// crosscheck_transformer_ops.py to recompute with torch.nn.functional.
//
// Each case is named by a prefix ("softmax_causal."): its inputs, `r` (the
// weights of the loss Σ r ⊙ out, so every output element carries its own
// gradient), `out`, and `d<input>` for every differentiable input. Sizes are
// a GPT's in miniature and odd on purpose (T = 17, 3 heads, head size 8,
// width 48): rows long enough for summation order to show, small enough to run
// in a blink. The metadata holds each case's scalar arguments.
//
// Usage: dpt_transformer_ops_dump OUT.safetensors   (exit 2 on bad usage)
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/checkpoint.h"
#include "dpt/nn.h"
#include "dpt/ops.h"

using namespace dpt;

namespace {
Rng rng(14);

Tensor normal(const Shape& shape, float scale = 1.0f, float shift = 0.0f) {
  Tensor t = Tensor::empty(shape, Device::host());
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = shift + scale * rng.normal();
  return t;
}

// A float printed so that reading it back gives the same float.
std::string exact(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", double(v));
  return text;
}

// Runs out = op(inputs), backward of Σ r ⊙ out, and files everything under `name.`.
void run_case(SafeTensorsFile& file, const std::string& name, std::vector<NamedTensor> inputs,
              const std::function<Tensor()>& op) {
  for (auto& in : inputs) in.tensor.set_requires_grad(true);
  Tensor out = op();
  Tensor r = normal(out.shape());
  sum(mul(out, r)).backward();
  file.tensors[name + ".out"] = to_safetensor(out);
  file.tensors[name + ".r"] = to_safetensor(r);
  for (auto& in : inputs) {
    file.tensors[name + "." + in.name] = to_safetensor(in.tensor);
    file.tensors[name + ".d" + in.name] = to_safetensor(in.tensor.grad());
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors (where to write the ops' inputs, outputs and gradients)\n",
                 argv[0]);
    return 2;
  }
  const int64_t batch = 4, time = 17, heads = 3, head_size = 8, width = heads * head_size * 2, vocab = 65;
  SafeTensorsFile file;

  // Attention's two products: scores q · kᵀ / √D, and probabilities · v; and the other two flag pairs.
  const float alpha = 1.0f / std::sqrt(float(head_size));
  const int64_t g = batch * heads;
  for (int flags = 0; flags < 4; ++flags) {
    bool ta = flags & 1, tb = flags & 2;
    std::string name = std::string("bmm_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    Tensor a = normal(ta ? Shape{g, head_size, time} : Shape{g, time, head_size});
    Tensor b = normal(tb ? Shape{g, time, head_size} : Shape{g, head_size, time});
    run_case(file, name, {{"a", a}, {"b", b}}, [&] { return batched_matmul(a, ta, b, tb, alpha); });
    file.metadata[name + ".alpha"] = exact(alpha);
  }

  std::vector<int64_t> tokens;  // even tokens only, most many times: the odd rows' gradient stays 0
  for (int64_t i = 0; i < batch * time; ++i) tokens.push_back(int64_t(rng.below(vocab / 2)) * 2 % vocab);
  Tensor table = normal({vocab, width});
  run_case(file, "embedding", {{"table", table}}, [&] { return embedding(table, tokens); });
  file.tensors["embedding.tokens"] = to_safetensor(tokens, {int64_t(tokens.size())});

  Tensor x = normal({batch, time, width}, 2.0f, 3.0f), w = normal({width}), b = normal({width});
  run_case(file, "layer_norm", {{"x", x}, {"weight", w}, {"bias", b}}, [&] { return layer_norm(x, w, b, 1e-5f); });
  file.metadata["layer_norm.eps"] = "1e-5";

  Tensor u = normal({batch, time, 4 * width}, 1.5f);
  run_case(file, "gelu", {{"x", u}}, [&] { return gelu(u); });

  Tensor scores = normal({batch, heads, time, time}, 3.0f);
  run_case(file, "softmax", {{"x", scores}}, [&] { return softmax(scores, false); });
  Tensor causal = normal({batch, heads, time, time}, 3.0f);
  run_case(file, "softmax_causal", {{"x", causal}}, [&] { return softmax(causal, true); });

  Tensor qkv = normal({batch, time, heads, head_size});
  run_case(file, "swap_axes_12", {{"x", qkv}}, [&] { return swap_axes_12(qkv); });

  Tensor wide = normal({batch * time, 3 * width});
  run_case(file, "columns", {{"x", wide}}, [&] { return columns(wide, width, width); });
  file.metadata["columns.begin"] = std::to_string(width);
  file.metadata["columns.count"] = std::to_string(width);

  write_safetensors(argv[1], file);
  return 0;
}
