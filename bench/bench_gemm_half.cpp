// bench_gemm_half — 16-bit GEMMs (bf16 and fp16 operands, fp32 sums: tensor
// cores) against fp32 SGEMM on one GPU, at exactly the GEMMs one training
// step of an MLP runs (step_shapes.h), and at one large square.
//
// On cuda:0, side by side in one run, per GEMM shape:
//   fp32   cuBLAS SGEMM (dpt's kernels, TF32 off: dpt's default);
//   tf32   the same with TF32 on (dpt::set_tf32: 10-bit operands, fp32 sums);
//   bf16   dpt::gpu::gemm_half, bf16 operands, fp32 output;
//   fp16   the same with fp16 operands.
// Before timing, each 16-bit GEMM is checked against SGEMM on the same
// operands widened to fp32: their products are exact in fp32 (8 × 8 or
// 11 × 11 significant bits fit in 24), so only the order of the fp32 sums
// differs: an fp32 sum of k positive terms is within (k − 1)·u of exact,
// relative, with u = 2⁻²⁴ when each addition rounds and 2⁻²³ when it
// truncates (tensor cores may), so the two GEMMs agree to within
// 2 · k · 2⁻²³ of the entry (operands are positive here: no cancellation).
// A wrong layout or transpose is off by O(1), ~2²³/k units of that.
//
// The CPU has no 16-bit arithmetic: chapter 11 multiplies rounded float32s
// with the fp32 GEMM there, so a CPU row would be the fp32 GEMM twice.
// bench_rounding measures what the CPU's emulation costs instead.
//
// Without a usable GPU it prints why and exits 0, writing {"skipped": reason}.
// Exit status: 0 every check passed, 3 a check failed, 1 an error, 2 a bad flag.
//
//     build/gpu/bin/bench_gemm_half                                # the issue's two shapes
//     build/gpu/bin/bench_gemm_half --config 784-256-10@256 --json gemm.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "gpu_timing.h"
#include "half_step.h"
#include "step_shapes.h"

using namespace dpt;
using namespace dpt::bench;
using json = nlohmann::json;

namespace {

const char* const kModes[] = {"fp32", "tf32", "bf16", "fp16"};

// One GEMM shape's operands on cuda:0: fp32, and each 16-bit format's copy.
struct GemmOperands {
  GemmDims d;
  Tensor a, b, c;                        // fp32 operands (random, positive) and output
  std::unique_ptr<Buffer16> a16[2], b16[2];  // [BF16, FP16] rounded copies
  Tensor wide_a[2], wide_b[2];           // the 16-bit copies widened back to fp32

  explicit GemmOperands(const GemmDims& dims, Rng& rng) : d(dims) {
    Device& gpu = Device::cuda(0);
    const Shape sa = d.transpose_a ? Shape{d.k, d.m} : Shape{d.m, d.k};
    const Shape sb = d.transpose_b ? Shape{d.n, d.k} : Shape{d.k, d.n};
    a = random(sa, rng), b = random(sb, rng), c = Tensor::empty({d.m, d.n}, gpu);
    for (int f = 0; f < 2; ++f) {
      const Half h = f == 0 ? Half::BF16 : Half::FP16;
      a16[f] = std::make_unique<Buffer16>(a.numel()), b16[f] = std::make_unique<Buffer16>(b.numel());
      gpu::round_to_half(a16[f]->ptr, a.data(), a.numel(), h, 0);
      gpu::round_to_half(b16[f]->ptr, b.data(), b.numel(), h, 0);
      wide_a[f] = Tensor::empty(sa, gpu), wide_b[f] = Tensor::empty(sb, gpu);
      gpu::widen_half(wide_a[f].data(), a16[f]->ptr, a.numel(), h, 0);
      gpu::widen_half(wide_b[f].data(), b16[f]->ptr, b.numel(), h, 0);
    }
  }
  static Tensor random(const Shape& s, Rng& rng) {
    std::vector<float> v(std::size_t(s[0] * s[1]));
    for (float& x : v) x = rng.uniform(0.5f, 1.0f);  // positive: |a|·|b| = a·b, no cancellation
    return Tensor::from_vector(s, v, Device::host()).to(Device::cuda(0));
  }
  void sgemm(const Tensor& x, const Tensor& y) {
    cuda_kernels(0).gemm(d.transpose_a, d.transpose_b, d.m, d.n, d.k, 1.0f, x.data(), y.data(), 0.0f, c.data());
  }
  void half(int f) {
    gpu::gemm_half(0, f == 0 ? Half::BF16 : Half::FP16, d.transpose_a, d.transpose_b, d.m, d.n, d.k, 1.0f,
                   a16[f]->ptr, b16[f]->ptr, 0.0f, c.data());
  }
  void run(int mode) {  // kModes[mode]; the TF32 switch is set by the caller
    if (mode < 2) sgemm(a, b);
    else half(mode - 2);
  }
  // Largest |16-bit GEMM − SGEMM on the widened operands| over the entry, in
  // units of k · 2⁻²³ (the header comment's bound is 2 of them).
  double check(int f) {
    set_tf32(false);
    sgemm(wide_a[f], wide_b[f]);
    const std::vector<float> ref = c.to_vector();
    half(f);
    const std::vector<float> got = c.to_vector();
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / (double(ref[i]) * double(d.k) * 0x1p-23));
    return std::isnan(worst) || got.empty() ? NAN : worst;
  }
};

json measure_dims(const GemmDims& d, int repeats, double window_s, Rng& rng, Verdicts& v, const std::string& where) {
  GemmOperands g(d, rng);
  for (int f = 0; f < 2; ++f)
    v.at_most(where + " " + d.name + ": " + kModes[f + 2] + " GEMM = SGEMM on the same operands (in units of k*2^-23)",
              g.check(f), 2.0,
              "products exact, only the fp32 sums' order and rounding differ; a wrong layout is off by ~2^23/k");
  std::vector<Workload> work;
  for (int mode = 0; mode < 4; ++mode)
    work.emplace_back(kModes[mode], [&g, mode] {
      set_tf32(mode == 1);
      g.run(mode);
    });
  std::vector<Workload*> all;
  for (Workload& w : work) all.push_back(&w);
  measure(all, repeats, window_s);
  set_tf32(false);
  json row = {{"name", d.name}, {"m", d.m}, {"n", d.n}, {"k", d.k}, {"flops", d.flops()}};
  for (int mode = 0; mode < 4; ++mode) row[std::string(kModes[mode]) + "_s"] = work[std::size_t(mode)].median();
  return row;
}

void print_table(const std::string& title, const json& rows) {
  Table t(title, {"GEMM", "m x n x k", "fp32 us", "tf32 us", "bf16 us", "fp16 us", "fp32 TFLOP/s", "bf16 TFLOP/s",
                  "fp32/bf16", "fp32/fp16"});
  for (const json& r : rows) {
    const double f32 = r["fp32_s"], bf = r["bf16_s"], fp = r["fp16_s"], flops = r["flops"];
    t.add_row({r["name"].get<std::string>(),
               std::to_string(r["m"].get<int64_t>()) + "x" + std::to_string(r["n"].get<int64_t>()) + "x" +
                   std::to_string(r["k"].get<int64_t>()),
               fixed(1e6 * f32, 1), fixed(1e6 * r["tf32_s"].get<double>(), 1), fixed(1e6 * bf, 1), fixed(1e6 * fp, 1),
               fixed(flops / f32 / 1e12, 1), fixed(flops / bf / 1e12, 1), fixed(f32 / bf, 2) + "x",
               fixed(f32 / fp, 2) + "x"});
  }
  t.print(std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gemm_half — bf16/fp16 GEMMs (tensor cores, fp32 sums) vs fp32 SGEMM on cuda:0", "bench_gemm_half"};
  std::vector<std::string> specs{"784-1024-1024-10@4096", "784-4096-4096-10@8192"};
  std::string json_path;
  int repeats = 5, square = 8192;
  double window_ms = 20;
  app.add_option("--config", specs, "WIDTHS@BATCH: the GEMMs one step of this MLP runs; repeatable")->capture_default_str();
  app.add_option("--square", square, "Also an n x n x n GEMM (0: none)")->check(CLI::Range(0, 32768))->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows per GEMM; the median is reported")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--window-ms", window_ms, "Length of one timing window")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  std::vector<Config> configs;
  if (!parse_configs(specs, "bench_gemm_half", configs)) return 2;
  json doc = {{"bench", "gemm_half"}};
  int status = 0;
  try {
    const std::string reason = gpu::unavailable_reason();
    if (!reason.empty()) {
      std::cout << "bench_gemm_half: skipped: " << reason << "\n";
      doc["skipped"] = reason;
    } else {
      doc["device"] = gpu::device_description(0);
      std::cout << "device: " << doc["device"].get<std::string>() << "\n";
      Verdicts v;
      Rng rng(3);
      json results = json::array();
      for (const Config& c : configs) {
        std::cout << "measuring the GEMMs of " << c.model << " at batch " << c.batch << " …\n" << std::flush;
        json rows = json::array();
        for (const GemmDims& d : step_gemm_dims(c.widths, c.batch))
          rows.push_back(measure_dims(d, repeats, window_ms / 1e3, rng, v, c.model + "@" + std::to_string(c.batch)));
        print_table("GEMMs of one step of " + c.model + " at batch " + std::to_string(c.batch) + ", cuda:0", rows);
        results.push_back({{"model", c.model}, {"batch", c.batch}, {"gemms", rows}});
      }
      doc["results"] = results;
      if (square > 0) {
        const int64_t n = square;
        json row = measure_dims({"square", false, false, n, n, n}, repeats, window_ms / 1e3, rng, v, "square");
        print_table("one large square GEMM, cuda:0 (the rate a GEMM-bound step could hope for)", json::array({row}));
        doc["square"] = row;
      }
      std::cout << " fp32/bf16: SGEMM's time over the bf16 GEMM's (above 1x the 16-bit GEMM is faster).\n";
      v.print(std::cout);
      status = v.exit_code();
      doc["verdicts_passed"] = status == 0;
    }
  } catch (const Error& e) {
    std::cerr << "bench_gemm_half: " << e.what() << "\n";
    return 1;
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return status;
}
