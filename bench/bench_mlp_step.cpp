// bench_mlp_step — how close does dpt's training step come to its own GEMMs,
// and to PyTorch's?
//
// An MLP step is three GEMMs per layer (forward x·Wᵀ, backward dy·W and dyᵀ·x)
// plus cheap elementwise work (bias, ReLU, softmax, the SGD update) and the
// bookkeeping of autograd (graph nodes, allocations). If the step runs at a
// large fraction of the GEMM rate at its own shapes, the core is not in the
// way; if not, the overhead is worth finding. For each batch size it prints
//   (a) Eigen SGEMM GFLOP/s through dpt::gemm at exactly the shapes the step
//       runs (FLOP-weighted: their FLOPs over the sum of their times);
//   (b) the whole step (forward, loss, backward, SGD step, zero_grad) in
//       GFLOP/s, counting 3× the forward FLOPs (2·B·in·out per layer);
//   (c) b/a, and the GEMM share: the time the step's GEMMs take alone over the
//       step's time (see the note the table prints about layer 0);
//   (d) the same step in PyTorch (bench/torch_mlp_step.py, one thread), and the
//       speed ratio dpt / PyTorch.
// Everything is single-threaded: dpt runs Eigen on one thread (the ranks are
// the parallelism), so PyTorch is pinned to one thread too.
//
// Timing: warm up, then `--repeats` rounds; a round times one window of each
// GEMM shape and one of the step, interleaved. Each window gives a time per
// call; the median window is reported (robust to a noisy neighbour).
//
// Run it:
//     build/dev/bin/bench_mlp_step                          # 784-256-10, B = 32,64,128,256
//     build/dev/bin/bench_mlp_step --batch 512 --seconds 3 --json step.json
//     build/dev/bin/bench_mlp_step --no-torch
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu_timing.h"
#include "machine.h"
#include "torch_json.h"
#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"

using namespace dpt;
using dpt_bench::Workload;

Tensor random_tensor(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, Device::cpu(0));
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.uniform(-1.0f, 1.0f);
  return t;
}

// ----------------------------------------------------------------------------
// (a) the GEMMs of one step, each alone

// One GEMM of the step: c (M, N) = op(a) · op(b).
struct GemmShape {
  std::string name;   // "fc0 forward x·Wᵀ"
  Tensor a, b, c;
  bool transpose_a, transpose_b;
  bool in_step;       // false for layer 0's dy·W: x needs no gradient, nobody computes it
  double flops() const { return 2.0 * double(c.size(0)) * double(c.size(1)) * double(transpose_a ? a.size(0) : a.size(1)); }
};

// For layer (in → out) at batch B: forward y (B,out) = x (B,in)·Wᵀ; backward
// dx (B,in) = dy (B,out)·W (out,in) and dW (out,in) = dyᵀ·x.
std::vector<GemmShape> step_gemms(const std::vector<int64_t>& widths, int64_t batch, Rng& rng) {
  std::vector<GemmShape> shapes;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    int64_t in = widths[l], out = widths[l + 1];
    std::string layer = "fc" + std::to_string(l);
    Tensor x = random_tensor({batch, in}, rng), w = random_tensor({out, in}, rng);
    Tensor dy = random_tensor({batch, out}, rng);
    shapes.push_back({layer + " forward  x.Wt  (" + std::to_string(batch) + "," + std::to_string(in) + ")x(" +
                          std::to_string(in) + "," + std::to_string(out) + ")",
                      x, w, Tensor::empty({batch, out}, Device::cpu(0)), false, true, true});
    shapes.push_back({layer + " backward dy.W  (" + std::to_string(batch) + "," + std::to_string(out) + ")x(" +
                          std::to_string(out) + "," + std::to_string(in) + ")",
                      dy, w, Tensor::empty({batch, in}, Device::cpu(0)), false, false, l > 0});
    shapes.push_back({layer + " backward dyt.x (" + std::to_string(out) + "," + std::to_string(batch) + ")x(" +
                          std::to_string(batch) + "," + std::to_string(in) + ")",
                      dy, x, Tensor::empty({out, in}, Device::cpu(0)), true, false, true});
  }
  return shapes;
}

// ----------------------------------------------------------------------------
// (b) the whole step

// A model and a fixed batch; step() is one full training step on them.
struct StepBench {
  MLP model;
  SGD optimizer;
  Tensor x;
  std::vector<int64_t> y;
  StepBench(const std::vector<int64_t>& widths, int64_t batch, Rng& rng)
      : model(widths, Device::cpu(0), rng),
        optimizer(model.parameters(), 1e-4f),  // small: weights barely move over thousands of steps
        x(random_tensor({batch, widths.front()}, rng)),
        y(batch) {
    for (auto& label : y) label = int64_t(rng.below(uint64_t(widths.back())));
  }
  void step() {
    Tensor loss = softmax_cross_entropy(model.forward(x), y);  // forward + loss
    loss.backward();                                            // backward
    optimizer.step();                                           // step
    optimizer.zero_grad();
  }
};

// ----------------------------------------------------------------------------
// (d) PyTorch, through bench/torch_mlp_step.py

nlohmann::json run_torch(const std::string& python, const std::string& script, const std::string& model,
                         const std::string& batches, double seconds, int repeats) {
  std::ostringstream cmd;
  cmd << "'" << python << "' '" << script << "' --model " << model << " --batch " << batches << " --seconds "
      << seconds << " --repeats " << repeats;
  return dpt_bench::run_json_command(cmd.str());
}

// ----------------------------------------------------------------------------
// one batch size: (a), (b), (c) measured side by side

struct BatchResult {
  nlohmann::json row;                  // what --json writes for this batch size
  std::vector<std::string> shape_names, shape_rates;  // per GEMM shape, for the shapes table
  double gemm_rate = 0, step_rate = 0, gemm_share = 0, step_s = 0;
};

BatchResult measure_batch(const std::vector<int64_t>& widths, int64_t batch, double seconds, int repeats, Rng& rng) {
  std::vector<GemmShape> shapes = step_gemms(widths, batch, rng);
  StepBench bench(widths, batch, rng);
  // Half of --seconds for the GEMMs (shared among the shapes), half for the step.
  std::vector<Workload> gemm_work(shapes.size());
  std::vector<Workload*> all;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    GemmShape* g = &shapes[s];
    gemm_work[s] = {[g] { gemm(g->a, g->transpose_a, g->b, g->transpose_b, g->c); },
                    seconds / 2 / double(shapes.size()) / repeats, {}};
    all.push_back(&gemm_work[s]);
  }
  Workload step_work{[&bench] { bench.step(); }, seconds / 2 / repeats, {}};
  all.push_back(&step_work);
  dpt_bench::measure(all, repeats);

  BatchResult r;
  double all_flops = 0, all_seconds = 0, step_gemm_seconds = 0;
  nlohmann::json per_shape = nlohmann::json::array();
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const GemmShape& g = shapes[s];
    double t = gemm_work[s].median();
    all_flops += g.flops(), all_seconds += t;
    if (g.in_step) step_gemm_seconds += t;
    r.shape_names.push_back(g.name.substr(0, g.name.find(" (")) + (g.in_step ? "" : " (not in step)"));
    r.shape_rates.push_back(fixed(g.flops() / t / 1e9, 1));
    per_shape.push_back({{"name", g.name}, {"flops", g.flops()}, {"seconds", t},
                         {"gflops", g.flops() / t / 1e9}, {"in_step", g.in_step}});
  }
  r.step_s = step_work.median();
  r.gemm_rate = all_flops / all_seconds;                                    // (a)
  r.step_rate = 3.0 * bench.model.forward_flops(batch) / r.step_s;          // (b)
  r.gemm_share = step_gemm_seconds / r.step_s;
  r.row = {{"batch", batch}, {"gemm_gflops", r.gemm_rate / 1e9}, {"step_s", r.step_s},
           {"step_gflops", r.step_rate / 1e9}, {"step_over_gemm", r.step_rate / r.gemm_rate},
           {"gemm_share", r.gemm_share}, {"gemms", per_shape}};
  return r;
}

// ----------------------------------------------------------------------------
// machine and output

std::string machine_line() {
  return dpt_bench::cpu_line() + "; Eigen " +
         std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " (" + Eigen::SimdInstructionSetsInUse() + "), 1 thread";
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (auto v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// Runs the PyTorch side and says what it ran on; null when skipped.
nlohmann::json torch_side(const std::string& python, const std::string& script, const std::string& model,
                          const std::vector<int64_t>& batches, double seconds, int repeats) {
  std::cout << "PyTorch: running " << script << " …\n" << std::flush;
  nlohmann::json torch = run_torch(python, script, model, join(batches), seconds, repeats);
  if (torch.contains("error")) {
    std::cout << "PyTorch: skipped (" << torch["error"].get<std::string>() << ")\n";
    return nullptr;
  }
  std::string blas = torch["blas"].get<std::string>();
  std::cout << "PyTorch: " << torch["torch"].get<std::string>() << ", BLAS " << blas << ", 1 thread\n";
  if (blas.rfind("netlib", 0) == 0)
    std::cout << "PyTorch: warning: netlib's reference BLAS is unoptimised; the dpt/torch column then measures\n"
                 "         that BLAS, not PyTorch (install OpenBLAS, see bench/README.md)\n";
  return torch;
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
  CLI::App app{"bench_mlp_step — the MLP training step vs the GEMM rate at its shapes, and vs PyTorch",
               "bench_mlp_step"};
  std::string model = "784-256-10", json_path, python = DPT_BENCH_PYTHON, script = DPT_BENCH_TORCH_SCRIPT;
  std::vector<int64_t> batches{32, 64, 128, 256};
  double seconds = 1.0;
  int repeats = 5;
  bool no_torch = false;
  app.add_option("--model", model, "Layer widths, e.g. 784-256-10")->capture_default_str();
  app.add_option("--batch", batches, "Batch sizes, comma-separated")->delimiter(',')->capture_default_str();
  app.add_option("--seconds", seconds, "Measuring time per batch size (half GEMMs, half step; PyTorch the same)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  app.add_option("--python", python, "Python with torch for the PyTorch column")->capture_default_str();
  app.add_flag("--no-torch", no_torch, "Skip the PyTorch column");
  CLI11_PARSE(app, argc, argv);
  std::vector<int64_t> widths;
  try {
    widths = parse_widths(model);
  } catch (const std::exception& e) {
    std::cerr << "bench_mlp_step: --model: " << e.what() << "\n";
    return 2;
  }
  for (auto b : batches)
    if (b <= 0) return std::cerr << "bench_mlp_step: --batch: expects positive integers, got " << b << "\n", 2;

  std::string machine = machine_line();
  std::cout << "machine: " << machine << "\n";
  nlohmann::json torch = no_torch ? nlohmann::json() : torch_side(python, script, model, batches, seconds, repeats);

  Rng rng(1);
  nlohmann::json results = nlohmann::json::array();
  Table table("MLP " + model + " training step vs the GEMM rate at its shapes (single-threaded: dpt Eigen, PyTorch 1 thread)",
              {"batch", "(a) GEMM GFLOP/s", "(b) step GFLOP/s", "(c) b/a", "GEMM share", "step ms",
               "(d) torch step GFLOP/s", "dpt/torch speed"});
  std::vector<std::string> shape_headers{"GEMM (dpt::gemm, Eigen)"};
  std::vector<std::vector<std::string>> shape_rows;  // [shape] = {name, rate at each batch…}
  for (int64_t batch : batches) {
    BatchResult r = measure_batch(widths, batch, seconds, repeats, rng);
    std::string torch_rate = "-", speed = "-";
    if (!torch.is_null())
      for (auto& t : torch["results"])
        if (t["batch"].get<int64_t>() == batch) {
          r.row["torch"] = t;
          r.row["dpt_over_torch"] = t["step_s"].get<double>() / r.step_s;
          torch_rate = fixed(t["step_gflops"].get<double>(), 1);
          speed = fixed(t["step_s"].get<double>() / r.step_s, 2) + "x";
        }
    table.add_row({std::to_string(batch), fixed(r.gemm_rate / 1e9, 1), fixed(r.step_rate / 1e9, 1),
                   fixed(100 * r.step_rate / r.gemm_rate, 0) + "%", fixed(100 * r.gemm_share, 0) + "%",
                   fixed(1e3 * r.step_s, 3), torch_rate, speed});
    shape_headers.push_back("B=" + std::to_string(batch));
    if (shape_rows.empty())
      for (auto& name : r.shape_names) shape_rows.push_back({name});
    for (std::size_t s = 0; s < shape_rows.size(); ++s) shape_rows[s].push_back(r.shape_rates[s]);
    results.push_back(r.row);
  }

  Table shapes_table("GFLOP/s per GEMM shape", shape_headers);
  for (auto& row : shape_rows) shapes_table.add_row(row);
  std::cout << "\n";
  shapes_table.print(std::cout);
  std::cout << "\n";
  table.print(std::cout);
  std::cout << " (a) FLOP-weighted over all 3 GEMMs per layer; (b) counts 3x the forward FLOPs;\n"
               " GEMM share = time of the GEMMs the step really runs (alone) / step time. Layer 0's dy.W\n"
               " is counted by (b) but computed by neither dpt nor PyTorch (x needs no gradient), so\n"
               " b/a overstates the step's efficiency; GEMM share does not. dpt/torch > 1: dpt faster.\n";

  if (!json_path.empty()) {
    nlohmann::json doc = {{"bench", "mlp_step"}, {"machine", machine}, {"model", model}, {"seconds", seconds},
                          {"repeats", repeats}, {"results", results}, {"torch", torch}};
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}
