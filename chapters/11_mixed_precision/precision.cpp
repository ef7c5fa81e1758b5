// precision.cpp — rounding float32 to bf16 and fp16 where the tensor lives
// (kernels.h's round_half: a loop over dpt/half_math.h on the CPU, its kernel
// on a GPU), and the autograd op that stores an activation in 16 bits.
#include "precision.h"

#include <cmath>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/half.h"
#include "dpt/kernels.h"

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

float smallest_normal(Precision p) { return math::smallest_normal_of(p != Precision::FP16); }

Half half_format(Precision p) {
  DPT_CHECK(p != Precision::FP32, "half_format: fp32 is not a 16-bit format");
  return p == Precision::BF16 ? Half::BF16 : Half::FP16;
}

float round_to(Precision p, float x) { return p == Precision::FP32 ? x : dpt::round_to(half_format(p), x); }

void round_(Tensor t, Precision p, Flushes* count) {
  if (p == Precision::FP32 || !t.defined()) return;
  math::RoundingCounts met{};
  kernels_for(t.device()).round_half(t.data(), t.numel(), half_format(p), count ? &met : nullptr);
  if (!count) return;
  count->nonzero += int64_t(met.nonzero);
  count->flushed += int64_t(met.flushed);
  count->tiny += int64_t(met.tiny);
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

bool has_inf_or_nan(const Tensor& t) { return kernels_for(t.device()).count_inf_or_nan(t.data(), t.numel()) > 0; }

}  // namespace dpt::ch11
