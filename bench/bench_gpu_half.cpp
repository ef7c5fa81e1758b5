// bench_gpu_half — the MLP training step in bf16 (or fp16) on one GPU, against
// dpt's fp32 step and PyTorch's autocast step, measured in the same run.
//
// The 16-bit step (HalfStep below) is written out over dpt/gpu_half.h and the
// CUDA kernels, not through autograd: the fast variant the bench measures,
// as bench/README.md labels it. It keeps what PyTorch's autocast keeps:
//   fp32 master weights and biases, cast to 16 bits at every step;
//   x cast to 16 bits; each Linear's GEMM on tensor cores (16-bit operands,
//   fp32 sums) writing a 16-bit output, then bias + ReLU on it in fp32,
//   rounded once; the last layer's logits, the loss and its gradient in fp32;
//   backward GEMMs on 16-bit operands: dW = dyᵀ·x and db = 1ᵀ·dy in fp32,
//   dx = dy·W in 16 bits, ReLU's backward on it; SGD on the fp32 masters.
// No loss scaling (bf16 needs none).
//
// It times, side by side, after checking the 16-bit step against the fp32
// one from the same weights (loss and update, within 16-bit rounding):
//   dpt fp32: the autograd step of the chapters (as bench_gpu_step), as a CUDA graph;
//   dpt 16-bit: HalfStep eager, and captured once as a CUDA graph and replayed
//     (replays checked against the eager step first);
//   PyTorch: bench/torch_half_step.py's autocast step as a CUDA graph, and its
//     fp32 eager step, run by this program after dpt's (DPT_BENCH_PYTHON).
// The goal (the issue): dpt's 16-bit step at or under PyTorch's graph replay.
// FLOP rates count 6·B·Σ in·out per step (three forwards), as the issue does.
//
// Without a usable GPU it prints why and exits 0, writing {"skipped": reason}.
// Exit status: 0 every goal met and every check passed, 3 a goal missed or a
// check failed, 4 the goal not judged (PyTorch wanted, not there), 1 an error,
// 2 a bad flag.
//
//     build/gpu/bin/bench_gpu_half                                  # the issue's two shapes
//     build/gpu/bin/bench_gpu_half --config 784-1024-1024-10@4096 --format fp16 --json out.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

using namespace dpt;
using json = nlohmann::json;
using gpu::Half;

// ----------------------------------------------------------------------------
// timing: GPU events around a window of calls, the median of `repeats` windows

double median_per_call(const std::function<void()>& fn, int repeats, double window_s) {
  gpu::Stream& stream = gpu::current_stream(0);
  auto window = [&](int calls) {
    gpu::Event start, stop;
    start.record(stream);
    for (int i = 0; i < calls; ++i) fn();
    stop.record(stream);
    stop.synchronize();
    return 1e-3 * double(stop.elapsed_ms_since(start)) / calls;
  };
  for (int i = 0; i < 3; ++i) fn();
  const int calls = int(std::clamp(window_s / std::max(window(3), 1e-7), 3.0, 20000.0));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) t.push_back(window(calls));
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// ----------------------------------------------------------------------------
// 16-bit buffers on cuda:0

struct Buffer16 {
  uint16_t* ptr = nullptr;
  explicit Buffer16(int64_t n) {
    ptr = static_cast<uint16_t*>(gpu::allocate(0, std::size_t(n) * sizeof(uint16_t)));
    DPT_CHECK(ptr, "bench_gpu_half: no room on cuda:0 for " << n << " 16-bit values");
  }
  ~Buffer16() { gpu::free(0, ptr); }
  Buffer16(const Buffer16&) = delete;
  Buffer16& operator=(const Buffer16&) = delete;
};

// ----------------------------------------------------------------------------
// the steps

// The chapters' fp32 step: autograd, cuBLAS SGEMM, SGD.
struct Fp32Step {
  Rng rng;
  MLP model;
  SGD optimizer;
  Tensor x, loss;
  std::vector<int64_t> labels;
  Fp32Step(const std::vector<int64_t>& widths, const Tensor& batch_x, std::vector<int64_t> batch_labels, float lr)
      : rng(7), model(widths, Device::cuda(0), rng), optimizer(model.parameters(), lr), x(batch_x),
        labels(std::move(batch_labels)) {}
  void run() {
    loss = softmax_cross_entropy(model.forward(x), labels);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  }
};

// The 16-bit step of the header comment, every buffer allocated up front, so
// a CUDA graph of run() writes only memory this object owns.
struct HalfStep {
  Half format;
  std::vector<int64_t> widths;
  int64_t batch;
  float lr;
  Rng rng;
  MLP model;  // the fp32 masters: fc_l.weight (out, in), fc_l.bias (out); the same seed as Fp32Step's
  std::vector<Tensor> params, dparams;  // W0, b0, W1, b1, … and their fp32 gradients
  Tensor x, logits, probs, dlogits, loss, one;
  std::vector<int64_t> labels;
  Buffer16 x16, ones16, dlogits16;
  std::vector<std::unique_ptr<Buffer16>> w16, act16, dact16;  // per layer; act16/dact16 for hidden layers

  HalfStep(Half f, const std::vector<int64_t>& w, const Tensor& batch_x, std::vector<int64_t> batch_labels, float rate)
      : format(f), widths(w), batch(batch_x.shape()[0]), lr(rate), rng(7), model(w, Device::cuda(0), rng),
        params(model.parameters()), x(batch_x), labels(std::move(batch_labels)), x16(batch * w.front()),
        ones16(batch), dlogits16(batch * w.back()) {
    Device& gpu = Device::cuda(0);
    for (const Tensor& p : params) dparams.push_back(Tensor::empty(p.shape(), gpu));
    logits = Tensor::empty({batch, w.back()}, gpu), probs = Tensor::empty({batch, w.back()}, gpu);
    dlogits = Tensor::empty({batch, w.back()}, gpu), loss = Tensor::empty({1}, gpu);
    one = Tensor::full({1}, 1.0f, gpu);
    Tensor ones = Tensor::full({batch}, 1.0f, gpu);
    gpu::round_to_half(ones16.ptr, ones.data(), batch, format, 0);
    for (std::size_t l = 0; l + 1 < w.size(); ++l) {
      w16.push_back(std::make_unique<Buffer16>(w[l] * w[l + 1]));
      if (l + 2 < w.size()) {
        act16.push_back(std::make_unique<Buffer16>(batch * w[l + 1]));
        dact16.push_back(std::make_unique<Buffer16>(batch * w[l + 1]));
      }
    }
    gpu::synchronize(0);  // `ones` is freed at the end of the constructor
  }

  void run() {
    Kernels& k = cuda_kernels(0);
    const std::size_t layers = widths.size() - 1;
    // forward: x (B, in) → … → logits (B, classes)
    gpu::round_to_half(x16.ptr, x.data(), x.numel(), format, 0);
    for (std::size_t l = 0; l < layers; ++l)
      gpu::round_to_half(w16[l]->ptr, params[2 * l].data(), params[2 * l].numel(), format, 0);
    const uint16_t* in = x16.ptr;
    for (std::size_t l = 0; l < layers; ++l) {
      const int64_t fan_in = widths[l], fan_out = widths[l + 1];
      if (l + 1 < layers) {  // y = relu(x·Wᵀ + b), stored in 16 bits
        gpu::gemm_half(0, format, false, true, batch, fan_out, fan_in, 1.0f, in, w16[l]->ptr, 0.0f, act16[l]->ptr);
        gpu::add_bias_relu_half(act16[l]->ptr, params[2 * l + 1].data(), batch, fan_out, true, format, 0);
        in = act16[l]->ptr;
      } else {  // logits in fp32
        gpu::gemm_half(0, format, false, true, batch, fan_out, fan_in, 1.0f, in, w16[l]->ptr, 0.0f, logits.data());
        k.add_bias(logits.data(), params[2 * l + 1].data(), batch, fan_out);
      }
    }
    const int64_t classes = widths.back();
    k.softmax_cross_entropy(probs.data(), loss.data(), logits.data(), labels.data(), batch, classes);
    // backward: dy (B, out) in 16 bits from the logits' gradient down
    k.softmax_cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), one.data(), batch, classes);
    gpu::round_to_half(dlogits16.ptr, dlogits.data(), dlogits.numel(), format, 0);
    const uint16_t* dy = dlogits16.ptr;
    for (std::size_t l = layers; l-- > 0;) {
      const int64_t fan_in = widths[l], fan_out = widths[l + 1];
      const uint16_t* layer_in = l == 0 ? x16.ptr : act16[l - 1]->ptr;
      // dW (out, in) = dyᵀ·x; db (1, out) = 1ᵀ·dy: fp32, for the fp32 masters
      gpu::gemm_half(0, format, true, false, fan_out, fan_in, batch, 1.0f, dy, layer_in, 0.0f, dparams[2 * l].data());
      gpu::gemm_half(0, format, false, false, 1, fan_out, batch, 1.0f, ones16.ptr, dy, 0.0f, dparams[2 * l + 1].data());
      if (l == 0) break;  // x needs no gradient
      // dx (B, in) = dy·W, then through the ReLU whose output act16[l−1] is
      gpu::gemm_half(0, format, false, false, batch, fan_in, fan_out, 1.0f, dy, w16[l]->ptr, 0.0f, dact16[l - 1]->ptr);
      gpu::relu_backward_half(dact16[l - 1]->ptr, act16[l - 1]->ptr, batch * fan_in, format, 0);
      dy = dact16[l - 1]->ptr;
    }
    for (std::size_t i = 0; i < params.size(); ++i)
      k.sgd_step(params[i].data(), dparams[i].data(), lr, 0.0f, params[i].numel());
  }

  std::vector<std::vector<float>> weights() const {
    std::vector<std::vector<float>> all;
    for (const Tensor& p : params) all.push_back(p.to_vector());
    return all;
  }
  void set_weights(const std::vector<std::vector<float>>& all) {  // no allocation on the GPU
    for (std::size_t i = 0; i < params.size(); ++i)
      gpu::copy(params[i].data(), all[i].data(), all[i].size() * sizeof(float), 0);
  }
};

// max |(a − before) − (b − before)| / max |b − before|: update a against update b.
double update_gap(const std::vector<std::vector<float>>& before, const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b) {
  double gap = 0, size = 0;
  for (std::size_t t = 0; t < before.size(); ++t)
    for (std::size_t i = 0; i < before[t].size(); ++i) {
      const double da = double(a[t][i]) - before[t][i], db = double(b[t][i]) - before[t][i];
      gap = std::isnan(da - db) ? NAN : std::max(gap, std::fabs(da - db));
      size = std::max(size, std::fabs(db));
    }
  return size > 0 ? gap / size : gap;
}

// ----------------------------------------------------------------------------
// one configuration

struct Config {
  std::string model;
  std::vector<int64_t> widths;
  int64_t batch = 0;
};

Config parse_config(const std::string& spec) {
  const auto at = spec.find('@');
  DPT_CHECK(at != std::string::npos, "--config: expected WIDTHS@BATCH such as 784-1024-1024-10@4096, got '" << spec << "'");
  Config c{spec.substr(0, at), parse_widths(spec.substr(0, at))};
  char* end = nullptr;
  c.batch = std::strtoll(spec.c_str() + at + 1, &end, 10);
  DPT_CHECK(c.batch > 0 && end && *end == '\0', "--config: the batch after '@' must be a positive integer, got '" << spec << "'");
  return c;
}

json measure_config(const Config& c, Half format, int repeats, double window_s, float lr, Verdicts& v) {
  const std::string label = c.model + " B=" + std::to_string(c.batch) + " " + gpu::half_name(format);
  Rng rng(1);
  std::vector<float> host_x(std::size_t(c.batch * c.widths.front()));
  for (float& value : host_x) value = rng.uniform(-1.0f, 1.0f);
  Tensor x = Tensor::from_vector({c.batch, c.widths.front()}, host_x, Device::host()).to(Device::cuda(0));
  std::vector<int64_t> labels(std::size_t(c.batch));
  for (auto& label_k : labels) label_k = int64_t(rng.below(uint64_t(c.widths.back())));
  Fp32Step fp32(c.widths, x, labels, lr);
  HalfStep half(format, c.widths, x, labels, lr);

  // (1) one step each from the same weights: 16 bits = fp32 within rounding.
  // Every operand rounded to 8 significant bits (bf16) is off by ≤ 2^-9 ≈ 0.2 %;
  // a few such in a row per layer, three layers: a few % at worst, while a
  // missing, transposed or doubled term is off by ~100 %.
  const auto start = half.weights();
  fp32.run();
  half.run();
  const double half_first_loss = half.loss.item();
  const double loss_gap = std::fabs(half_first_loss - fp32.loss.item()) / std::fabs(fp32.loss.item());
  std::vector<std::vector<float>> fp32_after;
  for (const Tensor& p : fp32.model.parameters()) fp32_after.push_back(p.to_vector());
  const auto half_after = half.weights();
  const double gap16 = update_gap(start, half_after, fp32_after);
  v.at_most(label + ": first loss vs fp32's (relative)", loss_gap, 0.02, "16-bit rounding of each operand: <= ~1 %");
  v.at_most(label + ": first update vs fp32's (relative to the largest)", gap16, 0.1,
            "dW from 16-bit x and dy: ~1 % an entry; a wrong gradient is off by ~1");

  // (2) graphs: both steps warmed, then captured (nothing allocates on cuda:0
  // after this). A capture CUDA refuses is reported, and that step timed eager.
  fp32.run();
  gpu::Stream& stream = gpu::current_stream(0);
  gpu::Graph fp32_graph, half_graph;
  json row = {{"model", c.model}, {"batch", c.batch}, {"format", gpu::half_name(format)}};
  auto capture = [&](gpu::Graph& graph, const std::function<void()>& step, const char* which) {
    try {
      graph.capture(stream, step);
      return true;
    } catch (const Error& e) {
      std::cout << label << ": " << which << " step: CUDA graph not captured: " << e.what() << "\n";
      row[std::string(which) + "_not_captured"] = e.what();
      return false;
    }
  };
  const bool fp32_captured = capture(fp32_graph, [&] { fp32.run(); }, "fp32");
  const bool half_captured = capture(half_graph, [&] { half.run(); }, "half");
  if (half_captured) {  // replay = eager: the first step again from `start`, replayed
    half.set_weights(start);
    half_graph.replay(stream);
    const double replay_loss_gap = std::fabs(double(half.loss.item()) - half_first_loss) / std::fabs(half_first_loss);
    const double replay_gap = update_gap(start, half.weights(), half_after);
    v.at_most(label + ": graph replay's loss = eager step's (relative)", replay_loss_gap, 1e-5,
              "the same kernels on the same data; only cuBLAS's algorithm choice may differ");
    v.at_most(label + ": graph replay's update = eager step's (relative)", replay_gap, 1e-3,
              "a missing, doubled or stale update is off by ~1");
  }

  row["flops"] = 6.0 * double(c.batch) * [&] {
    double s = 0;
    for (std::size_t l = 0; l + 1 < c.widths.size(); ++l) s += double(c.widths[l]) * double(c.widths[l + 1]);
    return s;
  }();
  row["fp32_graph_s"] = fp32_captured ? median_per_call([&] { fp32_graph.replay(stream); }, repeats, window_s)
                                      : median_per_call([&] { fp32.run(); }, repeats, window_s);  // eager
  row["half_eager_s"] = median_per_call([&] { half.run(); }, repeats, window_s);
  if (half_captured) row["half_graph_s"] = median_per_call([&] { half_graph.replay(stream); }, repeats, window_s);
  row["loss_gap"] = loss_gap, row["update_gap"] = gap16;
  return row;
}

// ----------------------------------------------------------------------------
// PyTorch, the same run

json run_torch(const std::vector<std::string>& specs, Half format, const std::string& python,
               const std::string& script, const std::string& out) {
  std::string cmd = "'" + python + "' '" + script + "' --format " + gpu::half_name(format) + " --json '" + out + "'";
  for (const auto& s : specs) cmd += " --config " + s;
  cmd += " > /dev/null";
  std::cout << "$ " << cmd << "\n" << std::flush;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  if (rc != 0 || !in) return {{"skipped", "torch_half_step.py failed with status " + std::to_string(rc)}};
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    return {{"skipped", std::string("torch_half_step.py wrote no JSON: ") + e.what()}};
  }
}

std::string us(double s) { return fixed(1e6 * s, 1); }

int report(const json& dpt_rows, const json& torch, bool torch_wanted, Verdicts& v) {
  std::map<std::string, json> by_config;
  if (torch.contains("results"))
    for (const json& r : torch["results"]) by_config[r["model"].get<std::string>() + "@" + std::to_string(r["batch"].get<int64_t>())] = r;
  Table table("MLP training step on cuda:0, SGD: dpt 16-bit vs dpt fp32 vs PyTorch autocast (same run)",
              {"config", "dpt fp32 graph us", "dpt 16-bit eager us", "dpt 16-bit graph us", "TFLOP/s",
               "fp32/16-bit", "torch 16-bit graph us", "torch/dpt", "torch fp32 eager us"});
  std::string summary;
  for (const json& r : dpt_rows) {
    const std::string key = r["model"].get<std::string>() + "@" + std::to_string(r["batch"].get<int64_t>());
    const double eager = r["half_eager_s"].get<double>(), graph = r.value("half_graph_s", eager);
    const double best = std::min(graph, eager);
    const bool has_torch = by_config.count(key) > 0;
    const double torch_s = has_torch ? by_config[key]["half_graph_s"].get<double>() : 0;
    table.add_row({key, us(r["fp32_graph_s"]), us(eager), r.contains("half_graph_s") ? us(graph) : "-",
                   fixed(r["flops"].get<double>() / best / 1e12, 0), fixed(r["fp32_graph_s"].get<double>() / best, 2) + "x",
                   has_torch ? us(torch_s) : "-", has_torch ? fixed(torch_s / best, 2) + "x" : "-",
                   has_torch ? us(by_config[key]["fp32_eager_s"]) : "-"});
    summary += (summary.empty() ? "" : ", ") + key + " " + us(best) + " us" +
               (has_torch ? " (" + fixed(best / torch_s, 2) + "x PyTorch's)" : "");
    if (has_torch)
      v.at_most(key + ": dpt " + r["format"].get<std::string>() + " step / PyTorch autocast graph replay", best / torch_s,
                1.0, "the issue's goal: at or under PyTorch's");
  }
  std::cout << "\n";
  table.print(std::cout);
  std::cout << " TFLOP/s: 6*B*sum(in*out) per step over dpt's faster 16-bit mode. The issue's anchor (H100, PyTorch 2.11):\n"
               " bf16 autocast graph 274 us at 784-1024-1024-10@4096, 2.02 ms at 784-4096-4096-10@8192.\n";
  if (torch.contains("skipped")) std::cout << " PyTorch: skipped: " << torch["skipped"].get<std::string>() << "\n";
  v.print(std::cout);
  std::cout << "summary: dpt " << dpt_rows[0]["format"].get<std::string>() << " step " << summary << "\n";
  if (v.failures() > 0) return kVerdictFailed;
  return torch.contains("results") || !torch_wanted ? 0 : 4;
}

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_half — the MLP step in bf16/fp16 on cuda:0 vs fp32 and PyTorch autocast", "bench_gpu_half"};
  std::vector<std::string> specs{"784-1024-1024-10@4096", "784-4096-4096-10@8192"};
  std::string format_name = "bf16", json_path, python = DPT_BENCH_PYTHON, script = DPT_BENCH_TORCH_HALF_SCRIPT;
  int repeats = 5;
  double window_ms = 30;
  float lr = 0.01f;
  bool no_torch = false;
  app.add_option("--config", specs, "WIDTHS@BATCH, repeatable")->capture_default_str();
  app.add_option("--format", format_name, "bf16 or fp16")->check(CLI::IsMember({"bf16", "fp16"}))->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows per workload; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--window-ms", window_ms, "Length of one timing window")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--python", python, "Python with torch, for bench/torch_half_step.py")->capture_default_str();
  app.add_flag("--no-torch", no_torch, "Do not run PyTorch's side");
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  const Half format = format_name == "bf16" ? Half::BF16 : Half::FP16;
  std::vector<Config> configs;
  try {
    for (const auto& spec : specs) configs.push_back(parse_config(spec));
  } catch (const Error& e) {
    std::cerr << "bench_gpu_half: " << e.what() << "\n";
    return 2;
  }
  json doc = {{"bench", "gpu_half"}, {"format", format_name}};
  int status = 0;
  try {
    const std::string reason = gpu::unavailable_reason();
    if (!reason.empty()) {
      std::cout << "bench_gpu_half: skipped: " << reason << "\n";
      doc["skipped"] = reason;
    } else {
      doc["device"] = gpu::device_description(0);
      std::cout << "device: " << doc["device"].get<std::string>() << "\n";
      Verdicts v;
      json rows = json::array();
      for (const Config& c : configs) {
        std::cout << "measuring " << c.model << " at batch " << c.batch << " …\n" << std::flush;
        rows.push_back(measure_config(c, format, repeats, window_ms / 1e3, lr, v));
      }
      const std::string torch_json = (json_path.empty() ? std::string("bench_gpu_half") : json_path) + ".torch.json";
      json torch = no_torch ? json{{"skipped", "--no-torch"}} : run_torch(specs, format, python, script, torch_json);
      doc["results"] = rows, doc["torch"] = torch;
      status = report(rows, torch, !no_torch, v);
      doc["verdicts_passed"] = status == 0;
    }
  } catch (const Error& e) {
    std::cerr << "bench_gpu_half: " << e.what() << "\n";
    return 1;
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return status;
}
