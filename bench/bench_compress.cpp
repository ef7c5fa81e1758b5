// bench_compress.cpp — chapter 10's compressors: encode + decode throughput
// against a memcpy of the same gradient (not a test: it measures).
//
// One rank (a threads world of 1), so every message is a copy and the time
// is the compressor's own work: the 16-bit casts convert Ψ floats there and
// back, top-k selects and decodes, sign packs and unpacks a bit per entry,
// PowerSGD multiplies and orthonormalizes. Throughput is gradient bytes
// (4Ψ) per second through Compressor::reduce; memcpy is the ceiling a
// compressor would need to beat to be free next to a fast link.
//
//     build/reference/bin/bench_compress                     # 784-256-10, median of 5
//     build/reference/bin/bench_compress --model 784-1024-1024-10 --json c.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "compressor.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/report.h"
#include "machine.h"

using namespace dpt;

namespace {
// Median seconds of `repeats` windows of `body`, after one warm-up call.
template <class Body>
double median_seconds(int repeats, Body body) {
  body();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::string model = "784-256-10", json;
  int repeats = 5;
  CLI::App app("bench_compress: chapter 10's compressors, encode + decode GB/s against memcpy");
  app.add_option("--model", model, "Layer widths")->capture_default_str();
  app.add_option("--repeats", repeats, "Timing windows (the median is printed)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--json", json, "Also write the numbers as JSON");
  CLI11_PARSE(app, argc, argv);

  std::vector<Shape> shapes;
  const std::vector<int64_t> widths = parse_widths(model);
  int64_t psi = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    shapes.push_back({widths[i + 1], widths[i]}), shapes.push_back({widths[i + 1]});
    psi += widths[i + 1] * widths[i] + widths[i + 1];
  }
  std::vector<float> gradient(static_cast<std::size_t>(psi));
  std::mt19937 generator(1);
  std::normal_distribution<float> normal;
  for (float& v : gradient) v = normal(generator);
  const double bytes = 4.0 * double(psi);

  Table table("bench_compress: " + model + " (Psi = " + std::to_string(psi) + "), 1 rank, " + dpt_bench::cpu_line(),
              {"what", "median time", "GB/s of gradient", "vs memcpy"});
  nlohmann::json out = {{"model", model}, {"psi", psi}, {"cpu", dpt_bench::cpu_line()}};
  std::vector<float> copy(gradient.size());
  const double memcpy_s = median_seconds(repeats, [&] { std::memcpy(copy.data(), gradient.data(), std::size_t(bytes)); });
  table.add_row({"memcpy", fmt(memcpy_s * 1e6, 3) + " us", fixed(bytes / memcpy_s / 1e9, 2), "1.00x"});
  out["memcpy_s"] = memcpy_s;
  LaunchOptions one;
  one.ranks = 1;
  launch(one, [&](Context& ctx) {
    for (const std::string& spec : std::vector<std::string>{"fp16", "bf16", "topk:" + std::to_string(std::max<int64_t>(1, psi / 100)),
                                                          "sign", "powersgd:4"}) {
      auto compressor = ch10::make_compressor(spec, shapes, 1);
      std::vector<float> x, delivered;
      const double s = median_seconds(repeats, [&] {
        x = gradient;
        compressor->reduce(ctx.comm, x, delivered);
      });
      table.add_row({spec, fmt(s * 1e6, 3) + " us", fixed(bytes / s / 1e9, 2), fixed(memcpy_s / s, 3) + "x"});
      out[spec + "_s"] = s;
    }
  });
  table.print(std::cout);
  std::cout << "Each compressor's time includes copying the gradient in (one memcpy) and, for top-k and sign,\n"
               "the 1-rank all-gather's copy. Reference code: plain loops, one thread.\n";
  if (!json.empty()) std::ofstream(json) << out.dump(2) << "\n";
  return 0;
}
