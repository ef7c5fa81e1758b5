// precision.cpp — rounding float32 to bf16 and fp16 on bit patterns
// (precision.h), and the autograd op that stores an activation in 16 bits.
#include "precision.h"

#include <cmath>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch11 {

namespace {
uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
}  // namespace

const char* precision_name(Precision p) {
  return p == Precision::FP32 ? "fp32" : p == Precision::BF16 ? "bf16" : "fp16";
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::FP32;
  if (text == "bf16") return Precision::BF16;
  if (text == "fp16") return Precision::FP16;
  throw Error("unknown precision '" + text + "': expected fp32, bf16 or fp16");
}

int bytes_per_value(Precision p) { return p == Precision::FP32 ? 4 : 2; }

float smallest_normal(Precision p) { return p == Precision::FP16 ? 0x1p-14f : 0x1p-126f; }

// ----------------------------------------------------------------------------
// bf16: the upper half of a float32. Rounding adds 0x7FFF plus the lowest kept
// bit (ties to even) to the 16 bits about to be dropped; a carry runs into the
// exponent, and past the largest finite bf16 into infinity, as it should.

uint16_t bf16_bits(float x) {
  uint32_t b = bits_of(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((b >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
  b += 0x7FFFu + ((b >> 16) & 1u);
  return uint16_t(b >> 16);
}

float from_bf16_bits(uint16_t bits) { return float_of(uint32_t(bits) << 16); }

// ----------------------------------------------------------------------------
// fp16: exponent bias 15 instead of 127, 10 mantissa bits instead of 23.
//   |x| ≥ 65520           → inf (65520 is the tie between 65504 and 2^16)
//   2^-14 ≤ |x| < 65520   → normal: round away 13 mantissa bits, rebias
//   |x| < 2^-14           → subnormal: the integer nearest |x| / 2^-24

uint16_t fp16_bits(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;   // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and up, inf included
  if (a >= 0x38800000u) {                       // 2^-14 and up: normal
    uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);  // round to nearest even at bit 13
    return sign | uint16_t((r - 0x38000000u) >> 13);  // exponent 127 → 15: minus 112 << 23
  }
  const uint32_t e = a >> 23;  // biased float32 exponent, ≤ 112 here
  if (e < 102) return sign;    // below 2^-25: nearer 0 than 2^-24
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;  // |x| = mant · 2^(e−150)
  const uint32_t shift = 126 - e;                     // |x| / 2^-24 = mant >> shift, 14..24
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;  // q = 1024 is 2^-14, the smallest normal: right bits
  return sign | uint16_t(q);
}

float from_fp16_bits(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t e = (bits >> 10) & 0x1Fu, m = bits & 0x3FFu;
  if (e == 0) return float_of(sign | bits_of(float(m) * 0x1p-24f));  // zero or subnormal: m · 2^-24, exact
  if (e == 31) return float_of(sign | 0x7F800000u | (m << 13));      // inf or NaN
  return float_of(sign | ((e + 112) << 23) | (m << 13));
}

float round_to(float x, Precision p) {
  switch (p) {
    case Precision::BF16: return from_bf16_bits(bf16_bits(x));
    case Precision::FP16: return from_fp16_bits(fp16_bits(x));
    default: return x;
  }
}

void round_(Tensor t, Precision p, Flushes* count) {
  if (p == Precision::FP32 || !t.defined()) return;
  DPT_CHECK(t.device().is_host_memory(), "ch11 rounds to " << precision_name(p) << " on the CPU; the tensor is on "
                                                           << t.device().name() << " (run with --device cpu)");
  float* d = t.data();
  const int64_t n = t.numel();
  int64_t zeros_before = 0, zeros_after = 0, tiny_after = 0;
  if (count)
    for (int64_t i = 0; i < n; ++i) zeros_before += (d[i] == 0);
  if (p == Precision::BF16)
    for (int64_t i = 0; i < n; ++i) d[i] = from_bf16_bits(bf16_bits(d[i]));
  else
    for (int64_t i = 0; i < n; ++i) d[i] = from_fp16_bits(fp16_bits(d[i]));
  if (!count) return;
  const float normal = smallest_normal(p);
  for (int64_t i = 0; i < n; ++i) zeros_after += (d[i] == 0), tiny_after += (std::fabs(d[i]) < normal);
  count->nonzero += n - zeros_before;
  count->tiny += tiny_after - zeros_before;
  count->flushed += zeros_after - zeros_before;  // rounding never turns 0 into anything else
}

Tensor store(const Tensor& x, Precision p, Flushes* gradient_flushes) {
  if (p == Precision::FP32) return x;
  Tensor out = x.clone();
  round_(out, p);
  return record(out, "store", {x}, [p, gradient_flushes](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = dout.clone();  // the stored activation's gradient is stored in 16 bits too
    round_(dx, p, gradient_flushes);
    return {dx};
  });
}

bool has_inf_or_nan(const Tensor& t) {
  const float* d = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(d[i])) return true;
  return false;
}

}  // namespace dpt::ch11
