// fast_casts.cpp — fast_casts.h: the lesson's 16-bit roundings, branch-free
// so that the loops vectorize, and fp16 through F16C where the CPU has it.
// Each per-element function below names the case of dpt/half.h it stands for.
#include "fast_casts.h"

#include <cstring>

#include "dpt/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dpt::ch10 {

namespace {

inline uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline float value(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// ----------------------------------------------------------------------------
// fp16, element by element, without branches (a = |x|'s bits)
inline uint16_t fp16_of(float x) {
  const uint32_t f = bits(x), sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
  // normal (a >= 2^-14): rebias the exponent 127 -> 15, then drop 13 bits to
  // nearest even: adding 0xfff plus the kept lsb carries exactly when the
  // dropped bits pass half, or are half and the kept bits are odd. A carry
  // out of the top exponent (from 65520 up) lands on 0x7c00, inf.
  const uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // subnormal or zero (a < 2^-14): in 0.5 + |x| the float's last bit is
  // 2^-24, fp16's subnormal step, so the FPU's own round-to-nearest-even
  // leaves |x| in units of 2^-24 in the low bits (1024 = 2^-14, the smallest normal).
  const uint32_t subnormal = bits(value(a) + 0.5f) - bits(0.5f);
  uint32_t h = a < (113u << 23) ? subnormal : normal;
  h = a >= 0x47800000u ? 0x7c00u : h;  // >= 65536: inf (and inf itself)
  h = a > 0x7f800000u ? 0x7e00u : h;   // NaN: the quiet NaN, sign kept
  return uint16_t(sign | h);
}

inline float float_of_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  const uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  // mantissa · 2^-24, exactly: 0.5 + mantissa · 2^-24 is a float whose low
  // bits are the mantissa; take 0.5 away (exact, the two are within 2x).
  const uint32_t subnormal = bits(value(mantissa | bits(0.5f)) - 0.5f);
  const uint32_t inf_nan = 0x7f800000u | (mantissa << 13);  // payload kept, a signalling NaN stays one
  uint32_t magnitude = exponent == 31 ? inf_nan : normal;
  magnitude = exponent == 0 ? subnormal : magnitude;  // two selects, not a nested one: a compiler vectorizes this
  return value(sign | magnitude);
}

// ----------------------------------------------------------------------------
// bf16: float32's top half, rounded to nearest even on the low 16 bits
inline uint16_t bf16_of(float x) {
  const uint32_t f = bits(x);
  const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;  // no wrap: the largest non-NaN is -inf, 0xff800000
  return uint16_t((f & 0x7fffffffu) > 0x7f800000u ? (f >> 16) | 0x40u : rounded);
}

#if defined(__x86_64__)
// F16C: eight floats per vcvtps2ph (round to nearest even, what MXCSR's
// default is and what the immediate asks for); NaN comes out with its
// payload, so it is replaced by the lesson's sign | 0x7e00.
__attribute__((target("avx2,f16c"))) void to_fp16_f16c(const float* x, uint16_t* h, int64_t n) {
  const __m128i magnitude_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00), quiet = _mm_set1_epi16(0x7e00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i magnitude = _mm_and_si128(half, magnitude_mask);
    const __m128i is_nan = _mm_cmpgt_epi16(magnitude, inf);  // signed compare is safe: magnitude < 0x8000
    const __m128i fixed = _mm_or_si128(_mm_andnot_si128(magnitude_mask, half), quiet);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm_blendv_epi8(half, fixed, is_nan));
  }
  for (; i < n; ++i) h[i] = fp16_of(x[i]);
}
bool cpu_has_f16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"); }
#else
void to_fp16_f16c(const float*, uint16_t*, int64_t) { DPT_FAIL("F16C is an x86-64 instruction set"); }
bool cpu_has_f16c() { return false; }
#endif

}  // namespace

Fp16Path best_fp16_path() {
  static const Fp16Path best = cpu_has_f16c() ? Fp16Path::F16C : Fp16Path::Portable;
  return best;
}

const char* fp16_path_name(Fp16Path path) { return path == Fp16Path::F16C ? "F16C" : "portable (no F16C)"; }

void to_fp16_many(const float* x, uint16_t* h, int64_t n, Fp16Path path) {
  if (path == Fp16Path::F16C) {
    DPT_CHECK(cpu_has_f16c(), "to_fp16_many: F16C asked for, but this CPU has no F16C (use Fp16Path::Portable)");
    return to_fp16_f16c(x, h, n);
  }
  for (int64_t i = 0; i < n; ++i) h[i] = fp16_of(x[i]);
}

void from_fp16_many(const uint16_t* h, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = float_of_fp16(h[i]);
}

void to_bf16_many(const float* x, uint16_t* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = bf16_of(x[i]);
}

void from_bf16_many(const uint16_t* h, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = value(uint32_t(h[i]) << 16);
}

}  // namespace dpt::ch10
