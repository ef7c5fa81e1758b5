// bench_gpt_step — chapter 14's GPT training step against PyTorch's, and
// where dpt's time goes.
//
// One training step (forward, cross-entropy, backward, AdamW, zero_grad) of
// the chapter's Gpt at nanoGPT's CPU configuration — 4 layers × 4 heads,
// width 128, context 64, batch 12, V = 65, ~0.8 M parameters — against the
// same step in PyTorch (bench/torch_gpt_step.py: nanoGPT's model.py as
// tests/pytorch/nanogpt.py writes it, torch.optim.AdamW), one thread each,
// in one run. Issue 39's goal: dpt's step time ≤ 1.0× PyTorch's.
//
// Then dpt's step by kind. Each group of kernels the step runs is timed alone,
// at the step's shapes and as many calls as one step makes (counted from
// gpt.cpp and the ops' backward closures):
//   GEMMs       the linear layers: x·Wᵀ, dy·W and dyᵀ·x of c_attn, attn.c_proj,
//               c_fc, mlp.c_proj in every block, and of lm_head
//   attention   the batched q·kᵀ and p·v with their four backward products; the
//               causal softmax and its backward; the head split and join
//               (columns, swap_axes_12, and their backward copies)
//   the rest    layer norms, GELU, embeddings, cross-entropy, bias adds and
//               sums, residual adds, the AdamW update; and what no kernel
//               accounts for (autograd's nodes, allocation, zero fills,
//               gradient accumulation): the step's time less every group's.
// Timing: cpu_timing.h (interleaved windows, the median), after PyTorch's run.
//
// Run it:
//     build/reference/bin/bench_gpt_step
//     build/reference/bin/bench_gpt_step --layers 6 --width 384 --heads 6 --context 256 --batch 8 --json gpt.json
#include <CLI/CLI.hpp>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_timing.h"
#include "gpt.h"
#include "machine.h"
#include "torch_json.h"
#include "dpt/kernels.h"
#include "dpt/optim.h"
#include "dpt/report.h"

using namespace dpt;
using dpt_bench::Workload;

namespace {

// ----------------------------------------------------------------------------
// the step's kernels by group, on buffers of the step's sizes

struct Group {
  std::string kind, what;
  int64_t calls = 0;           // kernel calls per step
  double flops = 0;            // GEMM groups: multiply-adds × 2 per step
  std::function<void()> run;   // every call of one step
};

// Every group reads only buffers no group writes (but the AdamW state, as a
// step does), so the values stay those of the first fill: bounded, none
// denormal, none saturating tanh in GELU to its fast path.
class KernelGroups {
 public:
  KernelGroups(const GptShape& s, int64_t batch, const std::vector<Tensor>& params) : k_(kernels_for(Device::cpu(0))) {
    const int64_t L = s.layers, C = s.width, V = s.vocab, T = s.context, H = s.heads, D = s.head_size();
    const int64_t BT = batch * T, BH = batch * H;
    add_gemms(L, BT, {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}, V, C);
    add_attention(L, BT, BH, T, C, D);
    add_rest(s, batch, params);
  }
  std::vector<Group> groups;

 private:
  Kernels& k_;
  std::vector<Tensor> keep_;
  Rng rng_{3};
  float* buffer(int64_t n) {  // filled with values in [-1, 1): no denormals, no NaN
    keep_.push_back(Tensor::empty({n}, Device::cpu(0)));
    for (int64_t i = 0; i < n; ++i) keep_.back().data()[i] = rng_.uniform(-1.0f, 1.0f);
    return keep_.back().data();
  }

  // linear (in → out) at BT rows, as ops.cpp's linear runs it forward and back.
  void add_gemms(int64_t L, int64_t BT, const std::vector<std::pair<int64_t, int64_t>>& per_block, int64_t V, int64_t C) {
    std::vector<std::tuple<int64_t, int64_t, int64_t>> linears;  // in, out, how many per step
    for (auto [in, out] : per_block) linears.emplace_back(in, out, L);
    linears.emplace_back(C, V, 1);  // lm_head
    Group g{"GEMMs", "linear layers: x.Wt, dy.W, dyt.x (4 per block, lm_head)", 0, 0, {}};
    std::vector<std::function<void()>> calls;
    for (auto [in, out, count] : linears) {
      float *x = buffer(BT * in), *w = buffer(out * in), *y = buffer(BT * out), *dy = buffer(BT * out);
      float *dx = buffer(BT * in), *dw = buffer(out * in);
      Kernels& k = k_;
      for (int64_t c = 0; c < count; ++c)
        calls.push_back([=, &k] {
          k.gemm(false, true, BT, out, in, 1.0f, x, w, 0.0f, y);    // y = x·Wᵀ
          k.gemm(false, false, BT, in, out, 1.0f, dy, w, 0.0f, dx);  // dx = dy·W
          k.gemm(true, false, out, in, BT, 1.0f, dy, x, 0.0f, dw);   // dW = dyᵀ·x
        });
      g.calls += 3 * count;
      g.flops += 6.0 * double(BT * in * out * count);
    }
    g.run = [calls] { for (auto& c : calls) c(); };
    groups.push_back(g);
  }

  // One block's attention, L times: q, k, v (BH, T, D); scores and p (BH, T, T).
  void add_attention(int64_t L, int64_t BT, int64_t BH, int64_t T, int64_t C, int64_t D) {
    float *q = buffer(BH * T * D), *kk = buffer(BH * T * D), *v = buffer(BH * T * D), *y = buffer(BH * T * D);
    float *s = buffer(BH * T * T), *p = buffer(BH * T * T), *dp = buffer(BH * T * T), *ds = buffer(BH * T * T);
    float *dq = buffer(BH * T * D), *dk = buffer(BH * T * D), *dv = buffer(BH * T * D), *dy = buffer(BH * T * D);
    float *qkv = buffer(BT * 3 * C), *dqkv = buffer(BT * 3 * C), *head = buffer(BT * C), *swapped = buffer(BT * C);
    Kernels& k = k_;
    const float alpha = 1.0f / std::sqrt(float(D));
    const int64_t TD = T * D, TT = T * T, B = BT / T, H = BH / B;
    groups.push_back({"attention", "batched q.kt and p.v, forward and backward", 6 * L,
                      12.0 * double(L * BH * T * T * D), [=, &k] {
                        for (int64_t l = 0; l < L; ++l) {
                          k.gemm_batched(false, true, T, T, D, alpha, q, TD, kk, TD, 0.0f, s, TT, BH);  // q·kᵀ
                          k.gemm_batched(false, false, T, D, T, 1.0f, p, TT, v, TD, 0.0f, y, TD, BH);    // p·v
                          k.gemm_batched(false, true, T, T, D, 1.0f, dy, TD, v, TD, 0.0f, dp, TT, BH);   // dp = dy·vᵀ
                          k.gemm_batched(true, false, T, D, T, 1.0f, p, TT, dy, TD, 0.0f, dv, TD, BH);   // dv = pᵀ·dy
                          k.gemm_batched(false, false, T, D, T, alpha, ds, TT, kk, TD, 0.0f, dq, TD, BH);  // dq = ds·k
                          k.gemm_batched(true, false, T, D, T, alpha, ds, TT, q, TD, 0.0f, dk, TD, BH);    // dk = dsᵀ·q
                        }
                      }});
    groups.push_back({"attention", "causal softmax, forward and backward", 2 * L, 0, [=, &k] {
                        for (int64_t l = 0; l < L; ++l) {
                          k.softmax(p, s, BH * T, T, T);
                          k.softmax_backward(ds, p, dp, BH * T, T);
                        }
                      }});
    // Forward: 3 column blocks out of qkv, 3 swaps to heads, 1 swap back; the
    // backward: the same swaps, and 3 zeroed (BT, 3C) gradients each given a block.
    groups.push_back({"attention", "head split and join: columns, swap_axes_12", 17 * L, 0, [=, &k] {
                        for (int64_t l = 0; l < L; ++l) {
                          for (int64_t w = 0; w < 3; ++w) k.copy_columns(head, C, qkv + w * C, 3 * C, BT, C);
                          for (int64_t w = 0; w < 4; ++w) k.swap_axes_12(swapped, head, B, T, H, D);
                          for (int64_t w = 0; w < 4; ++w) k.swap_axes_12(head, swapped, B, H, T, D);
                          for (int64_t w = 0; w < 3; ++w) {
                            k.fill(dqkv, 0.0f, BT * 3 * C);
                            k.copy_columns(dqkv + w * C, 3 * C, head, C, BT, C);
                          }
                        }
                      }});
  }

  void add_rest(const GptShape& s, int64_t batch, const std::vector<Tensor>& params) {
    const int64_t L = s.layers, C = s.width, V = s.vocab, T = s.context, BT = batch * T;
    float *x = buffer(BT * C), *out = buffer(BT * C), *dout = buffer(BT * C), *dx = buffer(BT * C);
    float *mean = buffer(BT), *rstd = buffer(BT), *w = buffer(C), *b = buffer(C), *dw = buffer(C), *db = buffer(C);
    float *h = buffer(BT * 4 * C), *gh = buffer(BT * 4 * C), *dh = buffer(BT * 4 * C), *dgh = buffer(BT * 4 * C);
    float *wte = buffer(V * C), *dwte = buffer(V * C), *wpe = buffer(T * C), *dwpe = buffer(T * C);
    float *logits = buffer(BT * V), *probs = buffer(BT * V), *dlogits = buffer(BT * V), *loss = buffer(1);
    float *bias = buffer(4 * C), *biased = buffer(BT * 4 * C), *dbias = buffer(4 * C);
    std::vector<int64_t> tokens(static_cast<std::size_t>(BT)), positions(tokens.size());
    for (int64_t i = 0; i < BT; ++i) tokens[std::size_t(i)] = int64_t(rng_.below(uint64_t(V))), positions[std::size_t(i)] = i % T;
    Kernels& k = k_;
    const int64_t norms = 2 * L + 1;
    groups.push_back({"the rest", "layer norm, forward and backward", 2 * norms, 0, [=, &k] {
                        for (int64_t n = 0; n < norms; ++n) {
                          k.layer_norm(out, mean, rstd, x, w, b, BT, C, 1e-5f);
                          k.layer_norm_backward(dx, dw, db, dout, x, mean, rstd, w, BT, C);
                        }
                      }});
    groups.push_back({"the rest", "GELU, forward and backward", 2 * L, 0, [=, &k] {
                        for (int64_t l = 0; l < L; ++l) {
                          k.gelu(gh, h, BT * 4 * C);
                          k.gelu_backward(dh, h, dgh, BT * 4 * C);
                        }
                      }});
    // Embeddings (2, and 2 zeroed tables in the backward), cross-entropy, a bias
    // add and sum per biased linear (4 per block), 2L + 1 residual/embedding adds.
    groups.push_back({"the rest", "embeddings, cross-entropy, bias add/sum, residual adds", 8 + 8 * L + 2 * L + 1, 0,
                      [=, &k] {
                        k.embedding(out, wte, tokens.data(), BT, C);
                        k.embedding(dx, wpe, positions.data(), BT, C);
                        k.fill(dwte, 0.0f, V * C);
                        k.fill(dwpe, 0.0f, T * C);
                        k.embedding_backward(dwte, dout, tokens.data(), BT, C);
                        k.embedding_backward(dwpe, dout, positions.data(), BT, C);
                        k.softmax_cross_entropy(probs, loss, logits, tokens.data(), BT, V);
                        k.softmax_cross_entropy_backward(dlogits, probs, tokens.data(), loss, BT, V);
                        for (int64_t l = 0; l < L; ++l)
                          for (int64_t width : {3 * C, C, 4 * C, C}) {
                            k.add_bias(biased, bias, BT, width);  // in place: grows by `bias` a call, never read
                            k.sum_rows(dbias, h, BT, width);
                          }
                        for (int64_t a = 0; a < 2 * L + 1; ++a) k.add(out, x, dout, BT * C);
                      }});
    std::vector<std::array<float*, 4>> state;  // p, m, v, g per parameter
    std::vector<int64_t> sizes;
    for (const Tensor& p : params) {
      state.push_back({buffer(p.numel()), buffer(p.numel()), buffer(p.numel()), buffer(p.numel())});
      for (int64_t i = 0; i < p.numel(); ++i) state.back()[2][i] = std::fabs(state.back()[2][i]);  // v ≥ 0
      sizes.push_back(p.numel());
    }
    AdamStep step;
    step.lr = 1e-4f, step.weight_decay = 0.01f, step.decoupled = true;
    step.at_step(10);
    groups.push_back({"the rest", "AdamW update, every parameter", int64_t(params.size()), 0, [=, &k] {
                        for (std::size_t i = 0; i < sizes.size(); ++i)
                          k.adam_step(state[i][0], state[i][1], state[i][2], state[i][3], step, sizes[i]);
                      }});
  }
};

// The chapter's step: a fixed batch of random tokens, AdamW as chapter 14 builds it.
struct GptStep {
  Rng rng{1};
  Gpt model;
  Adam optimizer;
  int64_t batch;
  std::vector<int64_t> inputs, targets;
  GptStep(const GptShape& shape, int64_t batch_)
      : model(shape, Device::cpu(0), rng),
        optimizer(model.parameters(), 1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, /*decoupled=*/true),
        batch(batch_) {
    for (int64_t i = 0; i < batch * shape.context; ++i) {
      inputs.push_back(int64_t(rng.below(uint64_t(shape.vocab))));
      targets.push_back(int64_t(rng.below(uint64_t(shape.vocab))));
    }
  }
  void step() {
    optimizer.zero_grad();
    model.loss(inputs, targets, batch).backward();
    optimizer.step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gpt_step — chapter 14's GPT training step vs PyTorch's, and where dpt's time goes",
               "bench_gpt_step"};
  GptShape shape;
  shape.vocab = 65;
  int64_t batch = 12;
  double seconds = 4.0;
  int repeats = 5;
  std::string json_path, python = DPT_BENCH_PYTHON, script = DPT_BENCH_TORCH_GPT_SCRIPT;
  bool no_torch = false;
  app.add_option("--layers", shape.layers, "L")->check(CLI::Range(1, 96))->capture_default_str();
  app.add_option("--heads", shape.heads, "H (divides --width)")->check(CLI::Range(1, 128))->capture_default_str();
  app.add_option("--width", shape.width, "C")->check(CLI::Range(1, 8192))->capture_default_str();
  app.add_option("--context", shape.context, "T")->check(CLI::Range(1, 8192))->capture_default_str();
  app.add_option("--vocab", shape.vocab, "V (65: the KJV's characters)")->check(CLI::Range(2, 1000000))->capture_default_str();
  app.add_option("--batch", batch, "B, sequences per step")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--seconds", seconds, "Measuring seconds: dpt takes them all (half the step, half its kernel groups), PyTorch half")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows; the median is reported")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  app.add_option("--python", python, "Python with torch for PyTorch's step")->capture_default_str();
  app.add_flag("--no-torch", no_torch, "Skip PyTorch's step");
  CLI11_PARSE(app, argc, argv);
  if (shape.width % shape.heads != 0)
    return std::cerr << "bench_gpt_step: --heads " << shape.heads << " does not divide --width " << shape.width << "\n", 2;

  const std::string machine = dpt_bench::cpu_line() + ", 1 thread";
  std::cout << "machine: " << machine << "\n";
  nlohmann::json torch;
  if (!no_torch) {
    std::ostringstream cmd;
    cmd << "'" << python << "' '" << script << "' --layers " << shape.layers << " --heads " << shape.heads << " --width "
        << shape.width << " --context " << shape.context << " --batch " << batch << " --vocab " << shape.vocab
        << " --seconds " << seconds / 2 << " --repeats " << repeats;
    std::cout << "PyTorch: running " << script << " …\n" << std::flush;
    torch = dpt_bench::run_json_command(cmd.str());
    if (torch.contains("error")) {
      std::cout << "PyTorch: skipped (" << torch["error"].get<std::string>() << ")\n";
      torch = nullptr;
    } else {
      std::cout << "PyTorch: " << torch["torch"].get<std::string>() << ", BLAS " << torch["blas"].get<std::string>()
                << ", 1 thread\n";
    }
  }

  GptStep bench(shape, batch);
  KernelGroups kernels(shape, batch, bench.model.parameters());
  Workload step_work{[&bench] { bench.step(); }, seconds / 2 / repeats, {}};
  std::vector<Workload> group_work;
  for (const Group& g : kernels.groups)
    group_work.push_back({g.run, seconds / 2 / repeats / double(kernels.groups.size()), {}});
  std::vector<Workload*> all{&step_work};
  for (Workload& w : group_work) all.push_back(&w);
  dpt_bench::measure(all, repeats);

  const double step_s = step_work.median();
  const std::string title = describe(shape) + ", batch " + std::to_string(batch) + ": " +
                            std::to_string(bench.model.num_parameters()) + " parameters";
  Table head("GPT training step (forward, cross-entropy, backward, AdamW), " + title + "; 1 thread each",
             {"dpt step ms", "PyTorch step ms", "dpt time / PyTorch time (goal <= 1.0x)"});
  const bool have_torch = !torch.is_null();
  const double torch_s = have_torch ? torch["step_s"].get<double>() : 0;
  head.add_row({fixed(1e3 * step_s, 2), have_torch ? fixed(1e3 * torch_s, 2) : "-",
                have_torch ? fixed(step_s / torch_s, 2) + "x" : "-"});
  std::cout << "\n";
  head.print(std::cout);

  Table where("Where dpt's step goes: each kernel group alone, at the step's shapes and call counts",
              {"kind", "kernels", "calls", "ms", "share of step", "GFLOP/s"});
  std::map<std::string, double> by_kind;
  nlohmann::json rows = nlohmann::json::array();
  double accounted = 0;
  for (std::size_t i = 0; i < kernels.groups.size(); ++i) {
    const Group& g = kernels.groups[i];
    const double t = group_work[i].median();
    accounted += t, by_kind[g.kind] += t;
    where.add_row({g.kind, g.what, std::to_string(g.calls), fixed(1e3 * t, 2), fixed(100 * t / step_s, 1) + "%",
                   g.flops > 0 ? fixed(g.flops / t / 1e9, 1) : ""});
    rows.push_back({{"kind", g.kind}, {"what", g.what}, {"calls", g.calls}, {"seconds", t}, {"flops", g.flops}});
  }
  const double other = step_s - accounted;
  by_kind["the rest"] += other;
  where.add_row({"the rest", "no kernel: autograd, allocation, zero fills, gradient sums (step - above)", "",
                 fixed(1e3 * other, 2), fixed(100 * other / step_s, 1) + "%", ""});
  std::cout << "\n";
  where.print(std::cout);
  std::cout << " by kind: GEMMs " << fixed(100 * by_kind["GEMMs"] / step_s, 0) << "%, attention "
            << fixed(100 * by_kind["attention"] / step_s, 0) << "%, the rest " << fixed(100 * by_kind["the rest"] / step_s, 0)
            << "% of dpt's " << fixed(1e3 * step_s, 2) << " ms step\n";

  if (!json_path.empty()) {
    nlohmann::json doc = {{"bench", "gpt_step"}, {"machine", machine}, {"shape", describe(shape)}, {"batch", batch},
                          {"parameters", bench.model.num_parameters()}, {"step_s", step_s}, {"groups", rows},
                          {"unaccounted_s", other}, {"torch", torch},
                          {"dpt_over_torch", have_torch ? nlohmann::json(step_s / torch_s) : nlohmann::json()}};
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}
