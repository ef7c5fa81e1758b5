// bench_gpu_step — the MLP training step on one GPU, against cuBLAS SGEMM at
// the step's own GEMM shapes and against the GPU's copy bandwidth.
//
// On cuda:0 it times, side by side in one run:
//   (a) cuBLAS SGEMM (cuda_kernels(0).gemm) alone at exactly the GEMMs one
//       step runs: per Linear layer (in → out) at batch B, forward
//       y = x·Wᵀ (B,in)·(in,out), backward dW = dyᵀ·x (out,B)·(B,in) and, for
//       every layer but the first (x needs no gradient), dx = dy·W
//       (B,out)·(out,in);
//   (b) the whole step, eager: forward, softmax cross-entropy, backward, SGD
//       step, zero_grad — the same calls a chapter makes;
//   (c) the same step captured once as a CUDA graph (gpu::Graph) and replayed,
//       after checking that replays give the eager step's losses and updates;
//   (d) references: device-to-device copy bandwidth (gpu::copy) and SGEMM on
//       one large square matrix (the rate a GEMM-bound step could hope for).
// The step's FLOP rate is its GEMM FLOPs over its time, so "step / SGEMM" is
// the time the GEMMs take alone over the step's time: 100 % means everything
// else (elementwise kernels, launches, autograd) costs nothing. Issue 10's
// goals, checked against PyTorch by bench/gpu_compare.py: at batch 4096 the
// step at ≥ 80 % of SGEMM's rate; at batch ≤ 256 the step no slower than
// PyTorch's CUDA-graph replay (bench/torch_step.py).
//
// Timing: gpu::Event pairs on the stream the work runs on, around a window of
// many calls after a warm-up; the median window of --repeats is reported.
// Workloads are measured in interleaved rounds, so a slow spell slows all alike.
//
// Without a usable GPU it prints why and exits 0, writing {"skipped": reason}.
//
//     build/gpu/bin/bench_gpu_step                          # the two shapes
//     build/gpu/bin/bench_gpu_step --config 784-256-10@64 --json out.json
//     build/gpu/bin/bench_gpu_step --no-graph
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "gpu_timing.h"
#include "gpu_training_step.h"
#include "step_shapes.h"

using namespace dpt;
using namespace dpt::bench;
using json = nlohmann::json;

// ----------------------------------------------------------------------------
// (a) the step's GEMMs, each alone on cuBLAS

// A step GEMM (step_shapes.h) with its operands on cuda:0.
struct GemmShape : GemmDims {
  Tensor a, b, c;
  void run() {
    cuda_kernels(0).gemm(transpose_a, transpose_b, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
  }
};

GemmShape make_gemm(const GemmDims& d) {
  Device& gpu = Device::cuda(0);
  // Operand values do not change a GEMM's time; a constant avoids host work.
  Tensor a = Tensor::full(d.transpose_a ? Shape{d.k, d.m} : Shape{d.m, d.k}, 0.01f, gpu);
  Tensor b = Tensor::full(d.transpose_b ? Shape{d.n, d.k} : Shape{d.k, d.n}, 0.01f, gpu);
  return {d, a, b, Tensor::empty({d.m, d.n}, gpu)};
}

std::vector<GemmShape> step_gemms(const std::vector<int64_t>& widths, int64_t batch) {
  std::vector<GemmShape> shapes;
  for (const GemmDims& d : step_gemm_dims(widths, batch)) shapes.push_back(make_gemm(d));
  return shapes;
}

// ----------------------------------------------------------------------------
// (b) the training step (TrainingStep, gpu_training_step.h) and (c) the step
// as one CUDA graph

// Captures `captured`'s step once, checks replays against `eager` steps from
// the same weights, and times the replays. Memory: a replay writes exactly the
// blocks the capture saw. The tensors the captured step freed (activations,
// gradients, backward's temporaries) went back to cuda:0's block cache, where
// the next allocation of their size would take them while the graph still
// writes them. So `captured` (model, optimizer, x, labels, and `loss`, whose
// block every replay rewrites) lives as long as the graph, and nothing
// allocates on cuda:0 while the graph lives: the eager reference runs before
// the capture, reading results copies to the host only, and the cache and
// usage of cuda:0 are checked unchanged when the graph is dropped.
json graph_step(TrainingStep& eager, TrainingStep& captured, int repeats, double window_s, Verdicts& verdicts,
                const std::string& label) {
  constexpr int kCheckSteps = 3;
  for (int i = 0; i < 2; ++i) captured.run();  // warm: every block size cached, cuBLAS and labels buffers made
  copy_parameters(eager.model, captured.model);
  auto before = eager.weights();
  std::vector<double> eager_losses;
  for (int i = 0; i < kCheckSteps; ++i) {
    eager.run();
    eager_losses.push_back(eager.loss.item());
  }
  auto eager_after = eager.weights();

  Device& gpu = Device::cuda(0);
  gpu::Stream& stream = gpu::current_stream(0);
  gpu::Graph graph;
  try {
    graph.capture(stream, [&] { captured.run(); });
  } catch (const Error& e) {
    std::cout << label << ": CUDA graph: not captured: " << e.what() << "\n";
    return {{"skipped", e.what()}};
  }
  const std::size_t cached = gpu.cached_bytes(), in_use = gpu.current_bytes();

  double worst_loss_gap = 0;
  for (int i = 0; i < kCheckSteps; ++i) {
    graph.replay(stream);
    double gap = std::fabs(captured.loss.item() - eager_losses[i]) / std::max(1.0, std::fabs(eager_losses[i]));
    worst_loss_gap = std::isnan(gap) ? NAN : std::max(worst_loss_gap, gap);
  }
  double update_gap = relative_update_gap(before, captured.weights(), eager_after);
  verdicts.at_most(label + ": graph replay's loss = eager step's, 3 steps (relative)", worst_loss_gap, 1e-5,
                   "same kernels in the same order; only cuBLAS's algorithm choice may differ: ~1e-6");
  verdicts.at_most(label + ": graph replay's weight update = eager step's (relative)", update_gap, 1e-3,
                   "a missing, doubled or mislabelled update is off by ~1");

  Workload replay{"graph", [&] { graph.replay(stream); }};
  measure({&replay}, repeats, window_s);
  bool untouched = gpu.cached_bytes() == cached && gpu.current_bytes() == in_use;
  verdicts.holds(label + ": nothing allocated on cuda:0 while the graph lived", untouched,
                 "cache " + format_bytes(double(cached)) + " -> " + format_bytes(double(gpu.cached_bytes())) +
                     ", in use " + format_bytes(double(in_use)) + " -> " + format_bytes(double(gpu.current_bytes())));
  return {{"step_s", replay.median()}, {"nodes", graph.node_count()}, {"loss_gap", worst_loss_gap},
          {"update_gap", update_gap}};
}

// ----------------------------------------------------------------------------
// one configuration: (a), (b), (c) side by side

json measure_config(const Config& c, int repeats, double window_s, bool with_graph, float lr, Verdicts& verdicts) {
  const std::string label = c.model + " B=" + std::to_string(c.batch);
  const GpuBatch drawn = random_batch(c.widths, c.batch);
  const Tensor& x = drawn.x;
  const std::vector<int64_t>& labels = drawn.labels;

  std::vector<GemmShape> shapes = step_gemms(c.widths, c.batch);
  TrainingStep eager(c.widths, x, labels, lr, 7), captured(c.widths, x, labels, lr, 7);
  std::vector<Workload> work;
  for (GemmShape& g : shapes) work.emplace_back(g.name, [&g] { g.run(); });
  work.emplace_back("step", [&eager] { eager.run(); });
  std::vector<Workload*> all;
  for (Workload& w : work) all.push_back(&w);
  measure(all, repeats, window_s);

  double step_flops = 0, sgemm_s = 0;
  json gemms = json::array();
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    double t = work[s].median();
    step_flops += shapes[s].flops(), sgemm_s += t;
    gemms.push_back({{"name", shapes[s].name}, {"m", shapes[s].m}, {"n", shapes[s].n}, {"k", shapes[s].k},
                     {"transpose_a", shapes[s].transpose_a}, {"transpose_b", shapes[s].transpose_b},
                     {"seconds", t}, {"tflops", shapes[s].flops() / t / 1e12}});
  }
  double eager_s = work.back().median();
  json row = {{"model", c.model}, {"batch", c.batch}, {"step_gemm_flops", step_flops}, {"gemms", gemms},
              {"sgemm_s", sgemm_s}, {"sgemm_tflops", step_flops / sgemm_s / 1e12},
              {"eager", {{"step_s", eager_s}, {"tflops", step_flops / eager_s / 1e12},
                         {"over_sgemm", sgemm_s / eager_s}}}};
  if (with_graph) {
    json graph = graph_step(eager, captured, repeats, window_s, verdicts, label);
    if (graph.contains("step_s")) {
      double t = graph["step_s"].get<double>();
      graph["tflops"] = step_flops / t / 1e12;
      graph["over_sgemm"] = sgemm_s / t;
    }
    row["graph"] = graph;
  }
  return row;
}

// ----------------------------------------------------------------------------
// (d) references: copy bandwidth and SGEMM on a large square

json copy_reference(int repeats, double window_s) {
  const int64_t floats = int64_t(64) << 20;  // 256 MiB: far past any cache
  Tensor src = Tensor::full({floats}, 1.0f, Device::cuda(0)), dst = Tensor::empty({floats}, Device::cuda(0));
  Workload copy{"copy", [&] { gpu::copy(dst.data(), src.data(), src.nbytes(), 0); }};
  measure({&copy}, repeats, window_s);
  double bytes = double(src.nbytes()), t = copy.median();
  // A copy reads and writes every byte: memory traffic is twice the size.
  return {{"bytes", bytes}, {"seconds", t}, {"copy_gb_per_s", bytes / t / 1e9},
          {"traffic_gb_per_s", 2 * bytes / t / 1e9}};
}

json sgemm_peak_reference(int repeats, double window_s) {
  const int64_t n = 8192;
  GemmShape g = make_gemm({"square", false, false, n, n, n});
  Workload w{"square", [&g] { g.run(); }};
  measure({&w}, repeats, window_s);
  return {{"m", n}, {"n", n}, {"k", n}, {"seconds", w.median()}, {"tflops", g.flops() / w.median() / 1e12}};
}

// ----------------------------------------------------------------------------
// output

void print_tables(const json& results, const json& copy, const json& peak) {
  Table table("MLP training step on cuda:0 vs cuBLAS SGEMM at the step's GEMM shapes (fp32)",
              {"model", "batch", "SGEMM us", "eager us", "graph us", "SGEMM TFLOP/s", "eager/SGEMM",
               "graph/SGEMM"});
  for (const json& r : results) {
    bool graph = r.contains("graph") && r["graph"].contains("step_s");
    table.add_row({r["model"].get<std::string>(), std::to_string(r["batch"].get<int64_t>()),
                   fixed(1e6 * r["sgemm_s"].get<double>(), 1), fixed(1e6 * r["eager"]["step_s"].get<double>(), 1),
                   graph ? fixed(1e6 * r["graph"]["step_s"].get<double>(), 1) : "-",
                   fixed(r["sgemm_tflops"].get<double>(), 2),
                   fixed(100 * r["eager"]["over_sgemm"].get<double>(), 0) + "%",
                   graph ? fixed(100 * r["graph"]["over_sgemm"].get<double>(), 0) + "%" : "-"});
  }
  std::cout << "\n";
  table.print(std::cout);
  std::cout << " SGEMM us = the step's GEMMs run alone, summed; x/SGEMM = SGEMM us / step us (the step's FLOP\n"
               " rate over cuBLAS's at the same shapes). Issue 10's goal at batch 4096: >= 80%.\n"
            << " references: device copy " << fixed(copy["copy_gb_per_s"].get<double>(), 0) << " GB/s ("
            << fixed(copy["traffic_gb_per_s"].get<double>(), 0) << " GB/s read+write); SGEMM "
            << peak["m"].get<int64_t>() << "^3 " << fixed(peak["tflops"].get<double>(), 2) << " TFLOP/s\n";
}

int run(const std::vector<Config>& configs, int repeats, double window_s, bool with_graph, float lr,
        const std::string& json_path) {
  json doc = {{"bench", "gpu_step"}};
  std::string reason = gpu::unavailable_reason();
  if (!reason.empty()) {
    std::cout << "bench_gpu_step: skipped: " << reason << "\n";
    doc["skipped"] = reason;
  } else {
    doc["device"] = gpu::device_description(0);
    std::cout << "device: " << doc["device"].get<std::string>() << "\n";
    Verdicts verdicts;
    json results = json::array();
    for (const Config& c : configs) {
      std::cout << "measuring " << c.model << " at batch " << c.batch << " …\n" << std::flush;
      results.push_back(measure_config(c, repeats, window_s, with_graph, lr, verdicts));
    }
    doc["copy"] = copy_reference(repeats, window_s);
    doc["sgemm_peak"] = sgemm_peak_reference(repeats, window_s);
    doc["results"] = results;
    print_tables(results, doc["copy"], doc["sgemm_peak"]);
    if (!verdicts.all().empty()) verdicts.print(std::cout);
    doc["verdicts_passed"] = verdicts.failures() == 0;
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return doc.value("verdicts_passed", true) ? 0 : kVerdictFailed;
}

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_step — the MLP training step on cuda:0 vs cuBLAS SGEMM at its shapes", "bench_gpu_step"};
  std::vector<std::string> specs{"784-256-10@256", "784-1024-1024-10@4096"};
  int repeats = 7;
  double window_ms = 50;
  float lr = 0.01f;
  bool no_graph = false;
  std::string json_path;
  app.add_option("--config", specs, "WIDTHS@BATCH, repeatable")->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows per workload; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--window-ms", window_ms, "Length of one timing window")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", lr, "SGD learning rate of the timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--no-graph", no_graph, "Skip the CUDA-graph variant of the step");
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  std::vector<Config> configs;
  if (!parse_configs(specs, "bench_gpu_step", configs)) return 2;
  try {
    return run(configs, repeats, window_ms / 1e3, !no_graph, lr, json_path);
  } catch (const Error& e) {
    std::cerr << "bench_gpu_step: " << e.what() << "\n";
    return 1;
  }
}
