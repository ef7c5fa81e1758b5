// precision.cpp — rounding float32 to bf16 and fp16 (the core's conversions,
// dpt/half.h), and the autograd op that stores an activation in 16 bits.
#include "precision.h"

#include <cmath>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/half.h"

namespace dpt::ch11 {


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
