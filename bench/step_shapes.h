// step_shapes.h — what the GPU benches measure: an MLP at a batch
// (WIDTHS@BATCH, as --config gives it) and the GEMMs one training step of it
// runs (ops.cpp's linear and its backward), layer by layer.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/nn.h"

namespace dpt::bench {

/// One --config: "784-1024-1024-10@4096".
struct Config {
  std::string model;            ///< the widths as given, "784-1024-1024-10"
  std::vector<int64_t> widths;  ///< {784, 1024, 1024, 10}
  int64_t batch = 0;            ///< 4096
};

/// Parses WIDTHS@BATCH; throws dpt::Error with one sentence otherwise.
inline Config parse_config(const std::string& spec) {
  const auto at = spec.find('@');
  DPT_CHECK(at != std::string::npos, "--config: expected WIDTHS@BATCH such as 784-1024-1024-10@4096, got '" << spec << "'");
  Config c{spec.substr(0, at), parse_widths(spec.substr(0, at))};
  char* end = nullptr;
  c.batch = std::strtoll(spec.c_str() + at + 1, &end, 10);
  DPT_CHECK(c.batch > 0 && end && *end == '\0' && end != spec.c_str() + at + 1,
            "--config: the batch after '@' must be a positive integer, got '" << spec << "'");
  return c;
}

/// Every --config parsed into `out`; on a bad one prints "<bench>: <why>" and
/// returns false (the caller exits 2, as for any bad flag).
inline bool parse_configs(const std::vector<std::string>& specs, const char* bench, std::vector<Config>& out) {
  try {
    for (const std::string& spec : specs) out.push_back(parse_config(spec));
    return true;
  } catch (const Error& e) {
    std::cerr << bench << ": " << e.what() << "\n";
    return false;
  }
}

/// c (m, n) = op(a) · op(b) with op(a) (m, k) — a is (k, m) when transposed —
/// and op(b) (k, n) — b is (n, k) when transposed. Row-major, as kernels.h.
struct GemmDims {
  std::string name;
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

/// Per Linear layer (in → out) at batch B: forward y = x·Wᵀ, backward
/// dW = dyᵀ·x and, for every layer but the first (x needs no gradient),
/// dx = dy·W.
inline std::vector<GemmDims> step_gemm_dims(const std::vector<int64_t>& widths, int64_t batch) {
  std::vector<GemmDims> dims;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], out = widths[l + 1];
    const std::string fc = "fc" + std::to_string(l);
    dims.push_back({fc + " forward  x.Wt", false, true, batch, out, in});
    if (l > 0) dims.push_back({fc + " backward dy.W", false, false, batch, in, out});
    dims.push_back({fc + " backward dyt.x", true, false, out, in, batch});
  }
  return dims;
}

}  // namespace dpt::bench
