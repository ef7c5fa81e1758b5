// test_ch11_rounding.cpp — chapter 11's rounding to bf16 and fp16 (provided
// code, precision.h) against bit patterns worked out from the formats'
// definitions, against the compiler's own _Float16 conversion, and against a
// nearest-even search written here in double arithmetic. None of these share
// code with precision.cpp's bit tricks.
#include "support/catch.h"
#include <cmath>
#include <cstdint>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "precision.h"

using namespace dpt;
using namespace dpt::ch11;

namespace {
// The bf16 nearest x, ties to the even mantissa: the two bf16 neighbours of x
// (x's upper 16 bits, and one step further from 0) compared in double.
uint16_t bf16_oracle(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t down = uint16_t(b >> 16), up = uint16_t(down + 1);
  const double below = std::fabs(double(x) - double(word_of(uint32_t(down) << 16)));
  const double above = std::fabs(double(word_of(uint32_t(up) << 16)) - double(x));
  if (below < above) return down;
  if (above < below) return up;
  return (down & 1u) ? up : down;
}
}  // namespace

TEST_CASE("bf16 rounding: known bit patterns, ties to even, overflow, NaN", "[ch11]") {
  struct Case { uint32_t in; uint16_t out; const char* why; };
  const Case cases[] = {
      {0x3F800000u, 0x3F80u, "1.0 is a bf16"},
      {0x3F808000u, 0x3F80u, "1 + 2^-8 is the tie between 1 and 1 + 2^-7: to the even 1"},
      {0x3F818000u, 0x3F82u, "1 + 3*2^-8 is a tie: to the even 1 + 2^-6"},
      {0x3F808001u, 0x3F81u, "just above the tie: up"},
      {0x3F807FFFu, 0x3F80u, "just below the tie: down"},
      {0x7F7FFFFFu, 0x7F80u, "the largest float rounds past bf16's largest: inf"},
      {0x80000000u, 0x8000u, "-0 stays -0"},
      {0x00000001u, 0x0000u, "the smallest float subnormal rounds to 0"},
      {0x7F800000u, 0x7F80u, "inf stays inf"},
  };
  for (const Case& c : cases) {
    INFO(c.why << ": bf16_bits(0x" << std::hex << c.in << ") should be 0x" << c.out << ", got 0x"
                << bf16_bits(word_of(c.in)));
    CHECK(bf16_bits(word_of(c.in)) == c.out);
  }
  INFO("a NaN must stay a NaN (not become inf by the rounding carry)");
  CHECK(std::isnan(round_to(Precision::BF16, word_of(0x7F800001u))));
  CHECK(std::isnan(round_to(Precision::BF16, word_of(0xFFFFFFFFu))));
}

TEST_CASE("bf16 rounding equals a nearest-even search on a million random floats", "[ch11]") {
  Rng rng(11);
  int64_t wrong = 0;
  uint32_t first = 0;
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t b = uint32_t(rng.next_u64());
    const float x = word_of(b);
    if (!std::isfinite(x) || (b & 0x7FFFFFFFu) >= 0x7F7F8000u) continue;  // NaN/inf, and those that round to inf
    if (bf16_bits(x) != bf16_oracle(x) && wrong++ == 0) first = b;
  }
  INFO(wrong << " floats rounded to another bf16 than the nearest (ties to even); the first 0x" << std::hex << first);
  CHECK(wrong == 0);
}

TEST_CASE("fp16 rounding: known bit patterns, subnormal boundaries, 65504/65520, NaN", "[ch11]") {
  struct Case { float in; uint16_t out; const char* why; };
  const Case cases[] = {
      {1.0f, 0x3C00u, "1.0"},
      {0.1f, 0x2E66u, "0.1 (0x2E66 = 0.0999755859375)"},
      {1.0f + 0x1p-11f, 0x3C00u, "1 + 2^-11 is the tie between 1 and 1 + 2^-10: to the even 1"},
      {1.0f + 3 * 0x1p-11f, 0x3C02u, "1 + 3*2^-11 is a tie: to the even 1 + 2^-9"},
      {65504.0f, 0x7BFFu, "65504 is fp16's largest"},
      {65519.99f, 0x7BFFu, "just below 65520 rounds down to 65504"},
      {65520.0f, 0x7C00u, "65520 is the tie between 65504 (odd) and 2^16: to inf"},
      {-65520.0f, 0xFC00u, "-65520: -inf"},
      {1e10f, 0x7C00u, "far above: inf"},
      {0x1p-14f, 0x0400u, "2^-14, the smallest normal"},
      {0x1p-14f - 0x1p-25f, 0x0400u, "just below 2^-14, half a subnormal step: the tie goes to the even 0x0400"},
      {0x1p-24f, 0x0001u, "2^-24, the smallest subnormal"},
      {0x1p-25f, 0x0000u, "2^-25 is the tie between 0 and 2^-24: to the even 0"},
      {0x1.000002p-25f, 0x0001u, "just above 2^-25: up to 2^-24"},
      {3 * 0x1p-25f, 0x0002u, "1.5 * 2^-24 is a tie: to the even 2 * 2^-24"},
      {5 * 0x1p-25f, 0x0002u, "2.5 * 2^-24 is a tie: to the even 2 * 2^-24"},
      {1e-30f, 0x0000u, "far below: 0"},
      {-0x1p-24f, 0x8001u, "negative subnormal"},
      {-0.0f, 0x8000u, "-0"},
      {INFINITY, 0x7C00u, "inf"},
  };
  for (const Case& c : cases) {
    INFO(c.why << ": fp16_bits(" << c.in << ") should be 0x" << std::hex << c.out << ", got 0x" << fp16_bits(c.in));
    CHECK(fp16_bits(c.in) == c.out);
  }
  const uint16_t nan = fp16_bits(NAN);
  INFO("NaN must stay a NaN: exponent all ones, mantissa not 0; got 0x" << std::hex << nan);
  CHECK((nan & 0x7C00u) == 0x7C00u);
  CHECK((nan & 0x03FFu) != 0);
}

#if defined(__FLT16_MAX__)
TEST_CASE("fp16 rounding equals the compiler's _Float16 conversion", "[ch11]") {
  // Every fp16 bit pattern back to float, both ways.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    _Float16 f;
    const uint16_t h16 = uint16_t(h);
    std::memcpy(&f, &h16, sizeof f);
    const float want = float(f), got = from_fp16_bits(h16);
    if (std::isnan(want)) {
      INFO("0x" << std::hex << h << " is a NaN");
      CHECK(std::isnan(got));
      continue;
    }
    INFO("from_fp16_bits(0x" << std::hex << h << ") should be " << want << ", got " << got);
    REQUIRE(bits_of(got) == bits_of(want));
    INFO("fp16_bits(from_fp16_bits(0x" << std::hex << h << ")) must give the pattern back");
    REQUIRE(fp16_bits(got) == h16);
  }
  // A million random floats, weighted toward fp16's range.
  Rng rng(16);
  int64_t wrong = 0;
  uint32_t first = 0;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t b = uint32_t(rng.next_u64());
    if (i % 2) b = (b & 0x807FFFFFu) | ((100u + uint32_t(rng.below(45))) << 23);  // exponents 2^-27 .. 2^17
    const float x = word_of(b);
    if (std::isnan(x)) continue;
    volatile float in = x;  // the conversion at run time, in the CPU's (or libgcc's) rounding
    const _Float16 h = _Float16(in);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    if (fp16_bits(x) != want && wrong++ == 0) first = b;
  }
  INFO(wrong << " floats rounded to another fp16 than _Float16's; the first 0x" << std::hex << first);
  CHECK(wrong == 0);
}
#endif

TEST_CASE("store rounds forward values and their gradients, and counts what it flushes", "[ch11]") {
  Tensor x = Tensor::from_vector({4}, {1.0f + 0x1p-11f, 3e-8f, 70000.0f, 0.5f}, Device::host());
  x.set_requires_grad(true);
  Flushes flushes;
  Tensor y = store(x, Precision::FP16, &flushes);
  const std::vector<float> forward = y.to_vector();
  CHECK(forward[0] == 1.0f);
  CHECK(forward[1] == 0x1p-24f);  // 3e-8 is above 2^-25: the smallest subnormal
  CHECK(std::isinf(forward[2]));
  CHECK(forward[3] == 0.5f);
  // with d loss / dy = c, dx = c rounded to fp16: c = (1e-9, 1e-5, 1, 1 + 2^-11).
  Tensor c = Tensor::from_vector({4}, {1e-9f, 1e-5f, 1.0f, 1.0f + 0x1p-11f}, Device::host());
  Tensor finite = Tensor::from_vector({4}, {1, 1, 0, 1}, Device::host());  // keep the inf out of the sum
  backward(y, mul(finite, c));
  const std::vector<float> dx = x.grad().to_vector();
  INFO("the gradient of a stored activation is stored in fp16 too: 1e-9 flushes to 0, 1e-5 is subnormal");
  CHECK(dx[0] == 0.0f);
  CHECK(dx[1] == round_to(Precision::FP16, 1e-5f));
  CHECK(dx[3] == 1.0f);
  CHECK(flushes.nonzero == 3);  // the gradient entering store: (1e-9, 1e-5, 0, 1 + 2^-11)
  CHECK(flushes.flushed == 1);
  CHECK(flushes.tiny == 2);     // 0 and the subnormal 1e-5
}
