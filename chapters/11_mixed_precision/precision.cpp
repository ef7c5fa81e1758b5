// precision.cpp — rounding float32 to bf16 and fp16 where the tensor lives
// (a loop over dpt/half_math.h here, its kernel on a GPU: dpt/gpu_half.h), and
// the autograd op that stores an activation in 16 bits.
#include "precision.h"

#include <cmath>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/gpu_half.h"
#include "dpt/half.h"
#include "dpt/half_math.h"

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

float round_to(float x, Precision p) {
  switch (p) {
    case Precision::BF16: return from_bf16_bits(bf16_bits(x));
    case Precision::FP16: return from_fp16_bits(fp16_bits(x));
    default: return x;
  }
}

void round_(Tensor t, Precision p, Flushes* count) {
  if (p == Precision::FP32 || !t.defined()) return;
  const bool bf16 = p == Precision::BF16;
  math::RoundingCounts met{};
  if (t.device().is_host_memory()) {  // one element's math is half_math.h's, as the GPU's kernel
    float* d = t.data();
    const int64_t n = t.numel();
    if (count)
      for (int64_t i = 0; i < n; ++i) d[i] = math::round_counting(d[i], bf16, met);
    else if (bf16)  // a loop per format: the compiler sees which conversion
      for (int64_t i = 0; i < n; ++i) d[i] = math::round_float(d[i], true);
    else
      for (int64_t i = 0; i < n; ++i) d[i] = math::round_float(d[i], false);
  } else {
    gpu::round_floats(t.data(), t.numel(), bf16 ? gpu::Half::BF16 : gpu::Half::FP16, t.device().index(),
                      count ? &met : nullptr);
  }
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

bool has_inf_or_nan(const Tensor& t) {
  if (!t.device().is_host_memory()) return gpu::count_inf_or_nan(t.data(), t.numel(), t.device().index()) > 0;
  const float* d = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (math::is_inf_or_nan(d[i])) return true;
  return false;
}

}  // namespace dpt::ch11
