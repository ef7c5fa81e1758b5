// bench_rounding — how fast does chapter 11 round float32 to bf16 and fp16
// on this CPU? GB/s of float32 read and written by round_ (precision.h, the
// chapter's plain loops: bit tricks per element, no SIMD intrinsics) next to
// a memcpy of the same bytes, the ceiling any elementwise pass can reach.
//
// Not a test: the numbers depend on the machine (and on who else uses it).
// A GPU does this conversion in the same kernel that stores the value, for
// free; here it is the price of emulating 16-bit storage on a CPU.
//
//     build/reference/bin/bench_rounding                 # 64 MiB, best of 5
//     build/reference/bin/bench_rounding --mib 256 --repeat 9
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>

#include "dpt/nn.h"
#include "dpt/report.h"
#include "machine.h"
#include "precision.h"

using namespace dpt;

namespace {
// Best (shortest) time of `repeat` runs of `body`, in seconds.
template <class F>
double best_of(int repeat, F body) {
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, seconds_since(start));
  }
  return best;
}
}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 64;
  int repeat = 5;
  CLI::App app{"bench_rounding — float32 to bf16/fp16 rounding GB/s against memcpy", "bench_rounding"};
  app.add_option("--mib", mib, "MiB of float32 per pass")->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option("--repeat", repeat, "passes; the best is reported")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const int64_t n = mib * 1024 * 1024 / 4;
  Rng rng(1);
  Tensor source = Tensor::empty({n}, Device::host()), work = Tensor::empty({n}, Device::host());
  for (int64_t i = 0; i < n; ++i) source.data()[i] = rng.normal() * 1e-3f;  // gradient-like: many fp16 subnormals
  const double bytes = 2.0 * double(n) * 4;  // read and write every float
  std::cout << dpt_bench::cpu_line() << "\n";
  Table t("rounding " + std::to_string(mib) + " MiB of float32 (best of " + std::to_string(repeat) + ")",
          {"pass", "GB/s (read + write)", "x memcpy"});
  const double copy = best_of(repeat, [&] { std::memcpy(work.data(), source.data(), std::size_t(n) * 4); });
  t.add_row({"memcpy", fixed(bytes / copy / 1e9, 2), "1.00"});
  for (ch11::Precision p : {ch11::Precision::BF16, ch11::Precision::FP16}) {
    const double s = best_of(repeat, [&] {
      std::memcpy(work.data(), source.data(), std::size_t(n) * 4);  // round fresh values each pass
      ch11::round_(work, p);
    }) - copy;
    t.add_row({std::string("round_ to ") + ch11::precision_name(p), fixed(bytes / s / 1e9, 2), fixed(copy / s, 2)});
  }
  t.print(std::cout);
  return 0;
}
