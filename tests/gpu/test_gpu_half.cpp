// test_gpu_half.cpp — dpt/gpu_half.h on cuda:0: the conversion kernels
// against dpt/half.h bit for bit, and the 16-bit GEMMs against a reference
// summed on the host in double from the same 16-bit operands (rounded on the
// host by dpt/half.h, so a wrong conversion kernel cannot hide a wrong GEMM).
//
// The GEMM's bound. Operands are bf16 (8 significant bits) or fp16 (11): a
// product of two is exact in fp32 (at most 22 bits, the inputs kept in the
// normal range), so the only error is in summing k products in fp32. In any
// order, with each addition rounded to nearest, the sum is off by at most
// (k − 1)·2^-24·Σ|a_i b_i| (Higham, Accuracy and Stability, §4.2). Tensor
// cores add a block of products at a time, aligned to the largest and
// truncated (Fasi et al. 2021, "Numerical behavior of NVIDIA tensor cores"):
// up to one ulp (2^-23) per step instead of half, and a second for the
// alignment. So: |c − ref| ≤ (k + 4)·2^-22·S, S = Σ|alpha·a_i b_i| + |beta·c|,
// the 4 for alpha, beta and the last roundings. A 16-bit c adds its own
// rounding, 2^-8 (bf16: 8 significant bits) or 2^-11 (fp16: 11) of |c|. At
// k ≤ 520 the fp32 bound is under 1.3e-4·S, while a single missing or
// misplaced product moves c by ~S/k ≥ 1.9e-3·S: a wrong transpose, leading
// dimension or operand fails (with a 16-bit c, a wrong layout moves most
// entries by ~S, far beyond its rounding).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/half.h"
#include "dpt/nn.h"  // Rng
#include "support/gpu.h"
#include "support/on_gpu.h"

using namespace dpt;
using dpt_test::from16;
using dpt_test::OnGpu;
using dpt_test::to16;

namespace {


// n values in ±[0.25, 2) with random signs, rounded to the format on the host.
std::vector<uint16_t> operand(int64_t n, Half f, Rng& rng) {
  std::vector<uint16_t> v(static_cast<std::size_t>(n));
  for (auto& h : v) h = to16((rng.below(2) ? -1.0f : 1.0f) * rng.uniform(0.25f, 2.0f), f);
  return v;
}

// Element (i, j) of op(x), x stored row-major as (rows, cols) of op's transpose when `t`.
double at(const std::vector<uint16_t>& x, bool t, int64_t i, int64_t j, int64_t op_cols, int64_t op_rows, Half f) {
  return from16(t ? x[std::size_t(j * op_rows + i)] : x[std::size_t(i * op_cols + j)], f);
}

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

// Runs one 16-bit GEMM on cuda:0, with c in fp32 or in the format, and
// counts entries outside the bound of the header comment.
void check_gemm(const GemmCase& g, Half f, bool half_out, Rng& rng) {
  INFO(half_name(f) << (half_out ? " -> 16-bit c" : " -> fp32 c") << ": ta " << g.ta << " tb " << g.tb << " m "
                         << g.m << " n " << g.n << " k " << g.k << " alpha " << g.alpha << " beta " << g.beta);
  std::vector<uint16_t> a = operand(g.m * g.k, f, rng), b = operand(g.k * g.n, f, rng), c0 = operand(g.m * g.n, f, rng);
  OnGpu<uint16_t> da(a), db(b);
  std::vector<double> got(std::size_t(g.m * g.n));
  std::vector<float> c_in(std::size_t(g.m * g.n));  // what c held before, as the GEMM reads it
  for (std::size_t i = 0; i < c0.size(); ++i) c_in[i] = from16(c0[i], f);
  if (half_out) {
    OnGpu<uint16_t> dc(c0);
    gpu::gemm_half(0, f, g.ta, g.tb, g.m, g.n, g.k, g.alpha, da.ptr, db.ptr, g.beta, dc.ptr);
    std::vector<uint16_t> c = dc.to_host();
    for (std::size_t i = 0; i < c.size(); ++i) got[i] = from16(c[i], f);
  } else {
    OnGpu<float> dc(c_in);
    gpu::gemm_half(0, f, g.ta, g.tb, g.m, g.n, g.k, g.alpha, da.ptr, db.ptr, g.beta, dc.ptr);
    std::vector<float> c = dc.to_host();
    for (std::size_t i = 0; i < c.size(); ++i) got[i] = c[i];
  }
  const double u16 = half_out ? (f == Half::BF16 ? 0x1p-8 : 0x1p-11) : 0.0;
  int64_t outside = 0;
  double worst = 0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double ref = 0, size = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        double prod = at(a, g.ta, i, p, g.k, g.m, f) * at(b, g.tb, p, j, g.n, g.k, f);
        ref += prod, size += std::fabs(prod);
      }
      const double before = c_in[std::size_t(i * g.n + j)];
      ref = g.alpha * ref + g.beta * before;
      size = std::fabs(g.alpha) * size + std::fabs(g.beta * before);
      const double sum_bound = double(g.k + 4) * 0x1p-22 * size;
      const double bound = sum_bound + u16 * (std::fabs(ref) + sum_bound);
      const double err = std::fabs(got[std::size_t(i * g.n + j)] - ref);
      if (!(err <= bound)) ++outside;
      if (size > 0) worst = std::max(worst, err / size);
    }
  INFO("worst |c - ref| / S = " << worst << " (bound (k+4)*2^-22 = " << double(g.k + 4) * 0x1p-22 << ", plus c's rounding)");
  CHECK(outside == 0);
}

}  // namespace

TEST_CASE("16-bit rounding on cuda:0 gives dpt/half.h's bits for every high half and the tie-deciding low halves",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  std::vector<float> x;
  Rng rng(3);
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      x.push_back(word_of((hi << 16) | lo));
    for (int r = 0; r < 4; ++r) x.push_back(word_of((hi << 16) | uint32_t(rng.below(0x10000))));
  }
  const auto n = int64_t(x.size());
  OnGpu<float> dx(x);
  for (Half f : {Half::BF16, Half::FP16}) {
    INFO(half_name(f));
    // every element, two a thread; all but the last (an odd count: the last
    // one alone); from the second on (off a pair's alignment: one a thread)
    for (int64_t skip : {0, 1, 2}) {
      const int64_t first = skip == 2 ? 1 : 0, count = skip == 0 ? n : n - 1;
      OnGpu<uint16_t> dh(n);
      gpu::round_to_half(dh.ptr + first, dx.ptr + first, count - first, f, 0);
      std::vector<uint16_t> h = dh.to_host();
      int64_t wrong = 0;
      for (int64_t i = first; i < count; ++i) wrong += h[std::size_t(i)] != to16(x[std::size_t(i)], f);
      INFO("elements " << first << " to " << count - 1);
      CHECK(wrong == 0);
    }
    std::vector<uint16_t> all(0x10000);
    for (uint32_t p = 0; p <= 0xffffu; ++p) all[p] = uint16_t(p);
    OnGpu<uint16_t> dall(all);
    OnGpu<float> wide(int64_t(all.size()));
    gpu::widen_half(wide.ptr, dall.ptr, int64_t(all.size()), f, 0);
    std::vector<float> w = wide.to_host();
    int64_t wrong = 0;
    for (uint32_t p = 0; p <= 0xffffu; ++p) wrong += bits_of(w[p]) != bits_of(from16(uint16_t(p), f));
    CHECK(wrong == 0);
  }
}

TEST_CASE("16-bit bias + ReLU and ReLU's backward on cuda:0 equal loops over dpt/half.h, past 65535 rows",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t rows = 70001;  // more rows than one grid's y dimension holds
  Rng rng(4);
  for (int64_t cols : {3, 4}) {  // one element a thread (odd), then two
    for (Half f : {Half::BF16, Half::FP16}) {
      INFO(half_name(f) << ", " << cols << " columns");
      std::vector<float> bias{0.5f, -0.25f, 1e-3f, -2.0f};
      bias.resize(std::size_t(cols));
      std::vector<uint16_t> y(std::size_t(rows * cols)), dy(y.size());
      for (auto& h : y) h = to16(rng.uniform(-2.0f, 2.0f), f);
      for (auto& h : dy) h = to16(rng.uniform(-1.0f, 1.0f), f);
      OnGpu<uint16_t> dev_y(y), dev_dy(dy);
      OnGpu<float> dev_bias(bias);
      gpu::add_bias_relu_half(dev_y.ptr, dev_bias.ptr, rows, cols, true, f, 0);
      std::vector<uint16_t> out = dev_y.to_host();
      int64_t wrong = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float v = from16(y[std::size_t(r * cols + c)], f) + bias[std::size_t(c)];
          wrong += out[std::size_t(r * cols + c)] != to16(v > 0.0f ? v : 0.0f, f);
        }
      CHECK(wrong == 0);
      gpu::relu_backward_half(dev_dy.ptr, dev_y.ptr, rows * cols, f, 0);
      std::vector<uint16_t> dx = dev_dy.to_host();
      wrong = 0;
      for (std::size_t i = 0; i < dx.size(); ++i) wrong += dx[i] != (from16(out[i], f) > 0.0f ? dy[i] : uint16_t(0));
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("bf16 and fp16 GEMMs on cuda:0 equal a double-precision sum of the same 16-bit operands, within fp32 "
          "summation's bound",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  Rng rng(6);
  const GemmCase cases[] = {
      {false, false, 33, 70, 130, 1.0f, 0.0f}, {false, true, 33, 70, 130, 1.0f, 0.0f},
      {true, false, 33, 70, 130, 1.0f, 0.0f},  {true, true, 33, 70, 130, 1.0f, 0.0f},
      {false, true, 128, 256, 512, 1.0f, 0.0f},  // a Linear's forward, x·Wᵀ, in tensor-core tiles
      {true, false, 96, 80, 520, 1.0f, 0.0f},    // its weight gradient, dyᵀ·x
      {false, false, 17, 9, 1, 0.5f, 2.0f},      // k = 1, and beta reads c
      {false, true, 64, 40, 200, -0.5f, 1.0f},
  };
  for (Half f : {Half::BF16, Half::FP16})
    for (bool half_out : {false, true})
      for (const GemmCase& g : cases) check_gemm(g, f, half_out, rng);
}

TEST_CASE("a 16-bit GEMM with k = 0 is refused with a sentence", "[gpu]") {
  DPT_REQUIRE_GPU();
  OnGpu<float> c(4);
  CHECK_THROWS_WITH(gpu::gemm_half(0, Half::BF16, false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, c.ptr),
                    contains_text("must be positive"));
}

TEST_CASE("float32 rounded in place on cuda:0 gives dpt/half.h's bits, and its counts equal a count on the host",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  Rng rng(29);
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(300001)}) {  // one block of partials, 4, and the cap of 1024
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = rng.below(8) == 0 ? 0.0f : std::ldexp(rng.uniform(-1.0f, 1.0f), int(rng.below(50)) - 34);
    if (n > 5) x[1] = INFINITY, x[2] = NAN, x[3] = 70000.0f, x[4] = -0.0f;
    for (Half f : {Half::BF16, Half::FP16}) {
      INFO("n = " << n << ", " << half_name(f));
      const float normal = f == Half::BF16 ? 0x1p-126f : 0x1p-14f;
      uint64_t nonzero = 0, flushed = 0, tiny = 0, not_finite = 0;
      std::vector<float> want(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {  // the oracle: dpt/half.h and std::fabs, on the host
        want[i] = from16(to16(x[i], f), f);
        nonzero += x[i] != 0.0f, flushed += x[i] != 0.0f && want[i] == 0.0f;
        tiny += x[i] != 0.0f && std::fabs(want[i]) < normal, not_finite += !std::isfinite(want[i]);
      }
      OnGpu<float> counted(x), plain(x);
      math::RoundingCounts met{1, 2, 3};  // round_floats adds to what is there
      gpu::round_floats(counted.ptr, n, f, 0, &met);
      gpu::round_floats(plain.ptr, n, f, 0);
      int64_t wrong = 0, wrong_plain = 0;
      const std::vector<float> got = counted.to_host(), got_plain = plain.to_host();
      for (std::size_t i = 0; i < x.size(); ++i)
        wrong += bits_of(got[i]) != bits_of(want[i]), wrong_plain += bits_of(got_plain[i]) != bits_of(want[i]);
      CHECK(wrong == 0);
      CHECK(wrong_plain == 0);
      CHECK(met.nonzero == nonzero + 1);
      CHECK(met.flushed == flushed + 2);
      CHECK(met.tiny == tiny + 3);
      CHECK(gpu::count_inf_or_nan(counted.ptr, n, 0) == int64_t(not_finite));
    }
  }
}
