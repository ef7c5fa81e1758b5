// test_half_math.cpp — dpt/half_math.h's one-element functions, the math both
// chapter 11's CPU loops and the GPU's round_floats / count_inf_or_nan kernels
// run: rounding against support/half_oracle.h (a separate implementation),
// the counts against values worked out by hand from the formats' definitions and against
// a count written here with std::fabs, the inf-or-NaN test against
// std::isfinite.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpt/half_math.h"
#include "dpt/nn.h"  // Rng
#include "support/catch.h"
#include "support/half_oracle.h"

using dpt_test::oracle::bits;
using dpt_test::oracle::word;
namespace math = dpt::math;
namespace oracle = dpt_test::oracle;

namespace {

// x rounded by the tests' own conversions (support/half_oracle.h).
float half_h_round(float x, bool bf16) {
  return bf16 ? oracle::from_bf16(oracle::to_bf16(x)) : oracle::from_fp16(oracle::to_fp16(x));
}

// One value and what rounding it must count, worked out by hand.
struct Case {
  uint32_t x;
  bool bf16;
  int nonzero, flushed, tiny;
  const char* what;
};
const Case kCases[] = {
    {0x00000000u, false, 0, 0, 0, "0: not counted"},
    {0x80000000u, true, 0, 0, 0, "-0: not counted"},
    {0x3f800000u, false, 1, 0, 0, "1"},
    {0x38800000u, false, 1, 0, 0, "2^-14, fp16's smallest normal: not tiny"},
    {0x387fffffu, false, 1, 0, 0, "just under 2^-14: rounds up to the smallest normal, not tiny"},
    {0x38000000u, false, 1, 0, 1, "2^-15: an fp16 subnormal, tiny"},
    {0x33800000u, false, 1, 0, 1, "2^-24, fp16's smallest subnormal: tiny, kept"},
    {0x33000000u, false, 1, 1, 1, "2^-25: the tie goes to 0, flushed"},
    {0xb3000001u, false, 1, 0, 1, "-(2^-25 + a bit): -2^-24, kept"},
    {0x32800000u, false, 1, 1, 1, "2^-26: flushed"},
    {0x477ff000u, false, 1, 0, 0, "65520: inf, neither flushed nor tiny"},
    {0x7fc00000u, false, 1, 0, 0, "NaN: non-zero, neither flushed nor tiny"},
    {0x00800000u, true, 1, 0, 0, "2^-126, the smallest normal of bf16 (and float32)"},
    {0x00400000u, true, 1, 0, 1, "2^-127: a float32 subnormal bf16 keeps, tiny"},
    {0x00000001u, true, 1, 1, 1, "float32's smallest subnormal: bf16 rounds it to 0"},
    {0x33000000u, true, 1, 0, 0, "2^-25 in bf16: a normal number"},
    {0xff800000u, true, 1, 0, 0, "-inf"},
};

}  // namespace

TEST_CASE("round_counting rounds as the oracle does: every high half, the tie-deciding low halves", "[half]") {
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff};
  int64_t wrong = 0, checked = 0;
  uint32_t first_wrong = 0;
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi)
    for (uint32_t lo : lows)
      for (bool bf16 : {true, false}) {
        const float x = word((hi << 16) | lo);
        math::RoundingCounts ignored{};
        const bool differs = bits(math::round_counting(x, bf16, ignored)) != bits(half_h_round(x, bf16)) ||
                             bits(math::round_float(x, bf16)) != bits(half_h_round(x, bf16));
        if (differs && wrong == 0) first_wrong = (hi << 16) | lo;
        wrong += differs, ++checked;
      }
  INFO("of " << checked << " roundings; the first that differs: 0x" << std::hex << first_wrong);
  CHECK(wrong == 0);
}

TEST_CASE("round_counting counts non-zero, flushed and tiny entries as worked out by hand", "[half]") {
  for (const Case& c : kCases) {
    INFO(c.what << " (" << (c.bf16 ? "bf16" : "fp16") << ")");
    math::RoundingCounts count{};
    math::round_counting(word(c.x), c.bf16, count);
    CHECK(count.nonzero == unsigned(c.nonzero));
    CHECK(count.flushed == unsigned(c.flushed));
    CHECK(count.tiny == unsigned(c.tiny));
  }
}

TEST_CASE("round_counting's counts add up to a count of the rounded values, over random gradients", "[half]") {
  dpt::Rng rng(23);
  for (bool bf16 : {true, false}) {
    INFO((bf16 ? "bf16" : "fp16"));
    const float normal = bf16 ? 0x1p-126f : 0x1p-14f;
    math::RoundingCounts count{};
    int64_t nonzero = 0, flushed = 0, tiny = 0;
    for (int i = 0; i < 100000; ++i) {
      // gradients over 40 binades, 2^-30 … 2^10, a zero now and then
      const float x = rng.below(10) == 0 ? 0.0f : std::ldexp(rng.uniform(-1.0f, 1.0f), int(rng.below(40)) - 30);
      const float r = math::round_counting(x, bf16, count);
      nonzero += x != 0.0f;
      flushed += x != 0.0f && r == 0.0f;
      tiny += x != 0.0f && std::fabs(r) < normal;
    }
    CHECK(count.nonzero == uint64_t(nonzero));
    CHECK(count.flushed == uint64_t(flushed));
    CHECK(count.tiny == uint64_t(tiny));
    if (!bf16) CHECK(count.flushed > 0);  // fp16 flushes below 2^-25: the sample reaches there
  }
}

TEST_CASE("is_inf_or_nan is !isfinite on every high half and its extreme low halves", "[half]") {
  int wrong = 0;
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0xffffu}) {
      const float x = word((hi << 16) | lo);
      wrong += math::is_inf_or_nan(x) != !std::isfinite(x);
    }
  CHECK(wrong == 0);
}

TEST_CASE("RoundingCounts add field by field", "[half]") {
  const math::RoundingCounts a{1, 2, 3}, b{10, 20, 30};
  const math::RoundingCounts c = a + b;
  CHECK(c.nonzero == 11);
  CHECK(c.flushed == 22);
  CHECK(c.tiny == 33);
}
