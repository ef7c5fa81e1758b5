// test_half_emulated.cpp — the GPU's 16-bit conversions (dpt/half_math.h, as
// common/backends/cuda/cuda_half.cuh's kernels call them), run here: the bit
// functions, against patterns worked out by hand and against
// support/half_oracle.h (a separate implementation, the tests' own); then the
// kernels themselves — conversions, bias + ReLU, chapter 11's in-place
// rounding with its counts and the inf-or-NaN count — launched with their own
// plans on the CPU emulator (support/cuda_emulator.h), against loops over
// the oracle.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/catch.h"
#include "support/half_oracle.h"
#include "support/cuda_emulator.h"
// after the emulator: it supplies CUDA's built-ins to the kernel code
#include "cuda_half.cuh"
#include "dpt/nn.h"  // Rng

namespace emulator = dpt_test::emulator;
namespace gpu16 = dpt::cuda::emulated;
namespace oracle = dpt_test::oracle;

namespace {

using dpt_test::oracle::bits;
using dpt_test::oracle::word;

// (float32 bits, its bf16, its fp16), rounded by hand: ties to even, fp16's
// subnormals, overflow to inf, NaN made quiet.
struct Known {
  uint32_t f;
  uint16_t bf16, fp16;
  const char* what;
};
const Known kKnown[] = {
    {0x3f800000u, 0x3f80, 0x3c00, "1"},
    {0xc0000000u, 0xc000, 0xc000, "-2"},
    {0x80000000u, 0x8000, 0x8000, "-0"},
    {0x3f808000u, 0x3f80, 0x3c04, "1 + 2^-8: bf16 tie, to the even 1"},
    {0x3f818000u, 0x3f82, 0x3c0c, "1 + 3*2^-8: bf16 tie, up to the even pattern"},
    {0x3f808001u, 0x3f81, 0x3c04, "just past bf16's tie: up"},
    {0x3f801000u, 0x3f80, 0x3c00, "1 + 2^-11: fp16 tie, to the even 1"},
    {0x3f803000u, 0x3f80, 0x3c02, "1 + 3*2^-11: fp16 tie, up to the even pattern"},
    {0x477fe000u, 0x4780, 0x7bff, "65504, fp16's largest"},
    {0x477fefffu, 0x4780, 0x7bff, "just under 65520: fp16 65504"},
    {0x477ff000u, 0x4780, 0x7c00, "65520: fp16's tie with 2^16, to inf"},
    {0x47800000u, 0x4780, 0x7c00, "2^16: fp16 inf"},
    {0x7f7fffffu, 0x7f80, 0x7c00, "float32's largest: bf16 carries into inf"},
    {0x7f7f7fffu, 0x7f7f, 0x7c00, "under bf16's tie at the top: bf16's largest"},
    {0x38800000u, 0x3880, 0x0400, "2^-14, fp16's smallest normal"},
    {0x387fffffu, 0x3880, 0x0400, "just under 2^-14: rounds up to the smallest normal"},
    {0x33800000u, 0x3380, 0x0001, "2^-24, fp16's smallest subnormal"},
    {0x33000000u, 0x3300, 0x0000, "2^-25: tie between 0 and 2^-24, to 0"},
    {0x33000001u, 0x3300, 0x0001, "just past 2^-25: 2^-24"},
    {0x33c00000u, 0x33c0, 0x0002, "1.5*2^-24: tie, up to 2*2^-24"},
    {0x34200000u, 0x3420, 0x0002, "2.5*2^-24: tie, down to 2*2^-24"},
    {0xb3c00000u, 0xb3c0, 0x8002, "-1.5*2^-24"},
    {0x32ffffffu, 0x3300, 0x0000, "under 2^-25: 0"},
    {0x00000001u, 0x0000, 0x0000, "float32's smallest subnormal"},
    {0x000116c2u, 0x0001, 0x0000, "a float32 subnormal bf16 keeps"},
    {0x7f800000u, 0x7f80, 0x7c00, "inf"},
    {0xff800000u, 0xff80, 0xfc00, "-inf"},
    {0x7f800001u, 0x7fc0, 0x7e00, "a signalling NaN: made quiet"},
    {0xffc00000u, 0xffc0, 0xfe00, "-NaN"},
};

}  // namespace

TEST_CASE("16-bit conversions of the GPU round known values to the patterns worked out by hand", "[half][emulator]") {
  for (const Known& k : kKnown) {
    INFO(k.what << ": float32 0x" << std::hex << k.f);
    CHECK(gpu16::bf16_of(word(k.f)) == k.bf16);
    CHECK(gpu16::fp16_of(word(k.f)) == k.fp16);
  }
  // widening: exact values
  CHECK(gpu16::float_of_fp16(0x0001) == 0x1p-24f);
  CHECK(gpu16::float_of_fp16(0x03ff) == 1023 * 0x1p-24f);
  CHECK(gpu16::float_of_fp16(0x8001) == -0x1p-24f);
  CHECK(gpu16::float_of_fp16(0x7bff) == 65504.0f);
  CHECK(gpu16::float_of_fp16(0x3c01) == 1.0f + 0x1p-10f);
  CHECK(bits(gpu16::float_of_fp16(0xfc00)) == 0xff800000u);
  CHECK(bits(gpu16::float_of_fp16(0x8000)) == 0x80000000u);
  CHECK(std::isnan(gpu16::float_of_fp16(0x7e00)));
  CHECK(gpu16::float_of_bf16(0x3f81) == 1.0f + 0x1p-7f);
  CHECK(bits(gpu16::float_of_bf16(0xff80)) == 0xff800000u);
}

TEST_CASE("16-bit conversions of the GPU give the oracle's bits: every high half, the tie-deciding low halves",
          "[half][emulator]") {
  // Every float32 is hi·2^16 + lo. bf16 rounds on lo (tie at 0x8000); fp16's
  // normals on lo's low 13 bits (tie at 0x1000), its subnormals on 14 to 24
  // bits (every hi's lo is varied randomly as well).
  std::vector<uint32_t> lows{0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2fff, 0x3000, 0x3001,
                             0x7fff, 0x8000, 0x8001, 0xa000, 0xf000, 0xffff};
  dpt::Rng rng(11);
  int64_t bf16_wrong = 0, fp16_wrong = 0, checked = 0;
  uint32_t first_wrong = 0;
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi) {
    for (int r = 0; r < 4; ++r) lows.push_back(uint32_t(rng.below(0x10000)));
    for (uint32_t lo : lows) {
      const float x = word((hi << 16) | lo);
      const bool b = gpu16::bf16_of(x) != oracle::to_bf16(x), h = gpu16::fp16_of(x) != oracle::to_fp16(x);
      if ((b || h) && bf16_wrong + fp16_wrong == 0) first_wrong = (hi << 16) | lo;
      bf16_wrong += b, fp16_wrong += h, ++checked;
    }
    lows.resize(14);
  }
  INFO("of " << checked << " floats; the first that differs: 0x" << std::hex << first_wrong);
  CHECK(bf16_wrong == 0);
  CHECK(fp16_wrong == 0);
}

TEST_CASE("16-bit patterns widen to the oracle's float32, and every non-NaN pattern survives the round trip",
          "[half][emulator]") {
  int wrong_bf16 = 0, wrong_fp16 = 0, trip_bf16 = 0, trip_fp16 = 0;
  for (uint32_t p = 0; p <= 0xffffu; ++p) {
    const auto h = uint16_t(p);
    wrong_bf16 += bits(gpu16::float_of_bf16(h)) != bits(oracle::from_bf16(h));
    wrong_fp16 += bits(gpu16::float_of_fp16(h)) != bits(oracle::from_fp16(h));
    if (!std::isnan(oracle::from_bf16(h))) trip_bf16 += gpu16::bf16_of(gpu16::float_of_bf16(h)) != h;
    if (!std::isnan(oracle::from_fp16(h))) trip_fp16 += gpu16::fp16_of(gpu16::float_of_fp16(h)) != h;
  }
  CHECK(wrong_bf16 == 0);
  CHECK(wrong_fp16 == 0);
  CHECK(trip_bf16 == 0);
  CHECK(trip_fp16 == 0);
}

// The plans take two elements a thread where the buffers allow: each layout
// below reaches another path (pairs; pairs and an odd last element; one a
// thread, for a buffer off a pair's alignment or an odd row length).
struct Layout {
  int64_t offset, rows, cols;
  const char* what;
};
const Layout kLayouts[] = {{0, 7, 300, "pairs"},
                           {0, 7, 301, "pairs, an odd last element; bias + ReLU one a thread (odd cols)"},
                           {1, 7, 300, "one a thread: off a pair's alignment"}};

TEST_CASE("16-bit kernels, launched with their plans on the emulator, equal loops over the oracle (support/half_oracle.h)",
          "[half][emulator]") {
  emulator::Launch launch;
  dpt::Rng rng(5);
  for (const Layout& at : kLayouts) {
    const int64_t rows = at.rows, cols = at.cols, n = rows * cols;
    std::vector<float> x_store(std::size_t(n + 1), 0.0f), bias_store(std::size_t(cols + 1), 0.0f);
    for (float& v : x_store) v = rng.uniform(-3.0f, 3.0f) * (rng.below(4) == 0 ? 1e-6f : 1.0f);  // some fp16 subnormals
    for (float& v : bias_store) v = rng.uniform(-1.0f, 1.0f);
    float* x = x_store.data() + at.offset;  // vector storage is 16-byte aligned: + 1 is off a pair's
    const float* bias = bias_store.data() + at.offset;
    x[3] = 0.0f, x[4] = -0.0f, x[5] = 70000.0f;
    for (bool bf16 : {true, false}) {
      INFO(at.what << ", " << (bf16 ? "bf16" : "fp16"));
      auto to = [bf16](float v) { return bf16 ? oracle::to_bf16(v) : oracle::to_fp16(v); };
      auto from = [bf16](uint16_t h) { return bf16 ? oracle::from_bf16(h) : oracle::from_fp16(h); };
      std::vector<uint16_t> h_store(std::size_t(n + 2), 0xdead);
      uint16_t* h = h_store.data() + at.offset;
      gpu16::launch_round_to_half(launch, h, x, n, bf16);
      int wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += h[i] != to(x[i]);
      CHECK(wrong == 0);
      CHECK(h[n] == 0xdead);  // nothing past the end

      std::vector<float> back(std::size_t(n), -1.0f);
      gpu16::launch_half_elementwise(launch, gpu16::widen_half_kernel, n, back.data(), h, n, bf16);
      wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += bits(back[std::size_t(i)]) != bits(from(h[i]));
      CHECK(wrong == 0);

      for (bool relu : {false, true}) {
        std::vector<uint16_t> y_store = h_store;
        uint16_t* y = y_store.data() + at.offset;
        gpu16::launch_bias_relu_half(launch, y, bias, rows, cols, relu, bf16);
        wrong = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            float v = from(h[r * cols + c]) + bias[c];
            if (relu) v = v > 0.0f ? v : 0.0f;
            wrong += y[r * cols + c] != to(v);
          }
        CHECK(wrong == 0);
        CHECK(y[n] == 0xdead);
      }

      std::vector<uint16_t> dy_store(std::size_t(n + 2), 0xbeef);
      uint16_t* dy = dy_store.data() + at.offset;
      for (int64_t i = 0; i < n; ++i) dy[i] = to(rng.uniform(-1.0f, 1.0f));
      const std::vector<uint16_t> before = dy_store;
      gpu16::launch_relu_backward_half(launch, dy, h, n, bf16);
      wrong = 0;
      for (int64_t i = 0; i < n; ++i)
        wrong += dy[i] != (from(h[i]) > 0.0f ? before[std::size_t(i + at.offset)] : uint16_t(0));
      CHECK(wrong == 0);
      CHECK(dy[n] == 0xbeef);
    }
  }
}

TEST_CASE("round_floats and count_inf_or_nan kernels, launched with their plans on the emulator, round as "
          "the oracle and count what a loop counts",
          "[half][emulator]") {
  emulator::Launch launch;
  dpt::Rng rng(17);
  for (int64_t n : {int64_t(1), int64_t(300), int64_t(2100), int64_t(300000)}) {  // 1, 2, 9 and 1024 blocks of partials
    if (n > 10000 && !emulator::kFast) continue;  // threads under the sanitizers: keep it small
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = rng.below(8) == 0 ? 0.0f : std::ldexp(rng.uniform(-1.0f, 1.0f), int(rng.below(50)) - 34);
    if (n > 5) x[1] = INFINITY, x[2] = NAN, x[3] = 70000.0f, x[4] = -0.0f;
    for (bool bf16 : {true, false}) {
      INFO("n = " << n << ", " << (bf16 ? "bf16" : "fp16"));
      const float normal = bf16 ? 0x1p-126f : 0x1p-14f;
      uint64_t nonzero = 0, flushed = 0, tiny = 0, not_finite = 0;
      std::vector<float> want(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {  // the oracle: support/half_oracle.h and std::fabs
        want[i] = bf16 ? oracle::from_bf16(oracle::to_bf16(x[i])) : oracle::from_fp16(oracle::to_fp16(x[i]));
        nonzero += x[i] != 0.0f, flushed += x[i] != 0.0f && want[i] == 0.0f;
        tiny += x[i] != 0.0f && std::fabs(want[i]) < normal, not_finite += !std::isfinite(want[i]);
      }
      const unsigned blocks = gpu16::count_blocks(n);
      std::vector<dpt::math::RoundingCounts> partials(blocks + 1, dpt::math::RoundingCounts{7, 7, 7});
      std::vector<float> got = x;
      gpu16::launch_round_floats(launch, got.data(), n, bf16, partials.data(), partials.data() + blocks);
      int wrong = 0;
      for (std::size_t i = 0; i < x.size(); ++i) wrong += bits(got[i]) != bits(want[i]);
      CHECK(wrong == 0);
      CHECK(partials[blocks].nonzero == nonzero);
      CHECK(partials[blocks].flushed == flushed);
      CHECK(partials[blocks].tiny == tiny);

      std::vector<float> plain = x;  // no counts asked: the same bits
      gpu16::launch_round_floats(launch, plain.data(), n, bf16, nullptr, nullptr);
      wrong = 0;
      for (std::size_t i = 0; i < x.size(); ++i) wrong += bits(plain[i]) != bits(want[i]);
      CHECK(wrong == 0);

      std::vector<unsigned long long> counts(blocks + 1, 7);
      gpu16::launch_count_inf_or_nan(launch, got.data(), n, counts.data(), counts.data() + blocks);
      CHECK(counts[blocks] == not_finite);
    }
  }
}
