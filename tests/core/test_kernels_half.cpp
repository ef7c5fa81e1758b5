// test_kernels_half.cpp — kernels.h's 16-bit ops on the CPU (round_half,
// gemm_half, count_inf_or_nan), the seam chapter 11 calls on every device,
// against the tests' own conversions (support/half_oracle.h) and serial sums
// in double written here. The GPU side is compared with the CPU side in
// tests/gpu/test_gpu_ch11.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"  // Rng
#include "support/catch.h"
#include "support/half_oracle.h"

using namespace dpt;
namespace oracle = dpt_test::oracle;

namespace {
float oracle_round(float x, Half f) {
  return f == Half::BF16 ? oracle::from_bf16(oracle::to_bf16(x)) : oracle::from_fp16(oracle::to_fp16(x));
}

std::vector<float> spread_values(std::size_t n, uint64_t seed) {  // magnitudes from 2^-30 to 2^20
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = (rng.uniform() < 0.5f ? -1.0f : 1.0f) * std::ldexp(1.0f + rng.uniform(), int(rng.uniform() * 50) - 30);
  return v;
}
}  // namespace

TEST_CASE("round_half on the CPU rounds every element as the oracle does, and counts what it met", "[half]") {
  Kernels& k = kernels_for(Device::host());
  for (Half f : {Half::FP16, Half::BF16}) {
    INFO(half_name(f));
    std::vector<float> x = spread_values(4096, 5);
    x[0] = 0.0f, x[1] = std::numeric_limits<float>::quiet_NaN(), x[2] = 1e-30f;  // zero not counted; 1e-30 flushes in fp16
    std::vector<float> want(x.size());
    math::RoundingCounts expected{0, 0, 0};
    const float normal = f == Half::BF16 ? 0x1p-126f : 0x1p-14f;
    for (std::size_t i = 0; i < x.size(); ++i) {
      want[i] = oracle_round(x[i], f);
      if (x[i] != 0.0f) {
        expected.nonzero += 1;
        expected.flushed += want[i] == 0.0f;
        expected.tiny += std::fabs(want[i]) < normal;
      }
    }
    math::RoundingCounts met{0, 0, 0};
    std::vector<float> counted = x, plain = x;
    k.round_half(counted.data(), int64_t(x.size()), f, &met);
    k.round_half(plain.data(), int64_t(x.size()), f, nullptr);
    int64_t wrong = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      wrong += !(oracle::bits(counted[i]) == oracle::bits(want[i]) || (std::isnan(counted[i]) && std::isnan(want[i]))) ||
               oracle::bits(plain[i]) != oracle::bits(counted[i]);
    CHECK(wrong == 0);
    CHECK(met.nonzero == expected.nonzero);
    CHECK(met.flushed == expected.flushed);
    CHECK(met.tiny == expected.tiny);
    CHECK((f == Half::BF16 || met.flushed > 0));  // the values reach below fp16's range
  }
}

TEST_CASE("gemm_half on the CPU equals a double-precision product of the operands rounded to the format", "[half]") {
  Kernels& k = kernels_for(Device::host());
  const int64_t m = 5, n = 4, kk = 7;
  for (Half f : {Half::FP16, Half::BF16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(half_name(f) << " ta " << ta << " tb " << tb);
        Rng rng(11);
        std::vector<float> a(std::size_t(m * kk)), b(std::size_t(kk * n)), c(std::size_t(m * n), -1.0f);
        for (float& v : a) v = 2.0f * rng.uniform() - 1.0f;
        for (float& v : b) v = 2.0f * rng.uniform() - 1.0f;
        k.gemm_half(f, ta, tb, m, n, kk, a.data(), b.data(), c.data());
        double worst = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < kk; ++p) {
              const float av = ta ? a[std::size_t(p * m + i)] : a[std::size_t(i * kk + p)];
              const float bv = tb ? b[std::size_t(j * kk + p)] : b[std::size_t(p * n + j)];
              s += double(oracle_round(av, f)) * double(oracle_round(bv, f));  // each product exact
            }
            worst = std::max(worst, std::fabs(s - double(c[std::size_t(i * n + j)])));
          }
        // Products are exact in fp32; the only error is fp32 summation of k = 7
        // terms below 1 in magnitude: at most 7 · 2^-24 · 7 ≈ 3e-6. Unrounded
        // operands would be off by ~2^-9 (bf16) or 2^-12 (fp16) per product.
        CHECK(worst < 1e-5);
      }
}

TEST_CASE("count_inf_or_nan on the CPU counts exactly the non-finite elements", "[half]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1.0f, inf, -inf, nan, 65504.0f, -0.0f, 3.4e38f};
  CHECK(kernels_for(Device::host()).count_inf_or_nan(x.data(), int64_t(x.size())) == 3);
  CHECK(kernels_for(Device::host()).count_inf_or_nan(x.data(), 1) == 0);
}
