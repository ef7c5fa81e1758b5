// test_gpu_half_lt.cpp — dpt/gpu_half_lt.h on cuda:0: one hidden Linear+ReLU
// layer forward and backward through cuBLASLt's epilogues, against the kernel
// path (gpu_half.h: gemm_half, add_bias_relu_half, relu_backward_half) on the
// same 16-bit operands.
//
// The bounds. Both paths sum the same 16-bit products in fp32: each sum is
// within e = (k + 4)·2^-22·S of the exact one, S = Σ|products| (the argument
// of test_gpu_half.cpp), so two sums differ by at most 2e. Rounding to 16
// bits moves a value v by at most u·|v|, u = 2^-8 (bf16, 8 significant bits)
// or 2^-11 (fp16). The kernel path rounds a hidden output twice (the GEMM's
// a, then a + bias after ReLU), cuBLASLt once, so
//     |y_lt − y_kernels| ≤ 2e + u·(|a| + |y_lt| + |y_kernels|),
// with |a| taken from a double-precision sum (plus the fp32 bias additions'
// 2^-24 each, and the margins of rounding() below). The ReLU masks may disagree
// only where the exact pre-activation is within that bound of 0; elsewhere a
// masked gradient is 0 in both, and an unmasked one within 2e + u·(both).
// A missing, transposed or misplaced product moves a value by about S/k, many
// times these bounds at k ≤ 200.
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/gpu_half_lt.h"
#include "dpt/half.h"
#include "dpt/nn.h"  // Rng
#include "support/gpu.h"
#include "support/on_gpu.h"

using namespace dpt;
using gpu::Epilogue;
using dpt_test::from16;
using dpt_test::OnGpu;
using dpt_test::to16;

namespace {

double unit_roundoff(Half f) { return f == Half::BF16 ? 0x1p-8 : 0x1p-11; }
double sum_bound(int64_t k, double size) { return double(k + 4) * 0x1p-22 * size; }
// Two values each rounded once to 16 bits from nearby floats: |v − r(v)| ≤
// u·|r(v)|/(1 − u) for normals (1.01·u covers it), and ≤ 2^-25 for fp16's
// subnormals.
double rounding(double u, float one, float other) {
  return 1.01 * u * (std::fabs(one) + std::fabs(other)) + 0x1p-24;
}

// n values in ±[0.25, 2) with random signs, rounded to the format on the host.
std::vector<uint16_t> operand(int64_t n, Half f, Rng& rng) {
  std::vector<uint16_t> v(static_cast<std::size_t>(n));
  for (auto& h : v) h = to16((rng.below(2) ? -1.0f : 1.0f) * rng.uniform(0.25f, 2.0f), f);
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& v, Half f) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = from16(v[i], f);
  return out;
}

// The sum over p of x (i, p)·w (j, p), exact in double, and of its |terms|.
struct Dot {
  double value = 0, size = 0;
};
Dot dot_rows(const std::vector<float>& x, int64_t i, const std::vector<float>& w, int64_t j, int64_t k) {
  Dot d;
  for (int64_t p = 0; p < k; ++p) {
    const double t = double(x[std::size_t(i * k + p)]) * w[std::size_t(j * k + p)];
    d.value += t, d.size += std::fabs(t);
  }
  return d;
}

}  // namespace

TEST_CASE("a hidden layer through cuBLASLt epilogues (bias+ReLU, ReLU's backward from its bit mask, the bias "
          "gradient) equals the kernel path within 16-bit rounding",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  // x (B, in) → y = relu(x·W1ᵀ + b1) (B, h); from the layer above, g (B, o)
  // and W2 (o, h) give dy = g·W2 masked by y's ReLU; then dW1 = dyᵀ·x, db1.
  // h = 200: the mask's rows are 256 bits, so its padding is exercised.
  const int64_t B = 64, in = 96, h = 200, o = 24;
  Rng rng(11);
  for (Half f : {Half::BF16, Half::FP16}) {
    INFO(half_name(f));
    const double u = unit_roundoff(f);
    const auto x = operand(B * in, f, rng), w1 = operand(h * in, f, rng), b1 = operand(h, f, rng);
    const auto g = operand(B * o, f, rng), w2 = operand(o * h, f, rng);
    const auto xf = widened(x, f), w1f = widened(w1, f), b1f = widened(b1, f), gf = widened(g, f);
    std::vector<float> w2t(std::size_t(h * o));  // W2ᵀ (h, o), for dot_rows
    for (int64_t r = 0; r < o; ++r)
      for (int64_t c = 0; c < h; ++c) w2t[std::size_t(c * o + r)] = from16(w2[std::size_t(r * h + c)], f);
    OnGpu<uint16_t> dx(x), dw1(w1), db1(b1), dg(g), dw2(w2);
    OnGpu<float> db1_f32(b1f);
    std::vector<uint16_t> ones_host(std::size_t(B), to16(1.0f, f));
    OnGpu<uint16_t> ones(ones_host);

    // ---- the kernel path
    OnGpu<uint16_t> y_k(B * h), dy_k(B * h);
    gpu::gemm_half(0, f, false, true, B, h, in, 1.0f, dx.ptr, dw1.ptr, 0.0f, y_k.ptr);
    gpu::add_bias_relu_half(y_k.ptr, db1_f32.ptr, B, h, true, f, 0);
    gpu::gemm_half(0, f, false, false, B, h, o, 1.0f, dg.ptr, dw2.ptr, 0.0f, dy_k.ptr);
    gpu::relu_backward_half(dy_k.ptr, y_k.ptr, B * h, f, 0);

    // ---- cuBLASLt: three GEMMs, no other launch
    OnGpu<uint16_t> y_l(B * h), dy_l(B * h);
    OnGpu<uint8_t> mask(gpu::relu_mask_bytes(B, h));
    OnGpu<float> dW_l(h * in), db_l(h), dW_k(h * in), db_k(h);
    gpu::LtOperands fwd;
    fwd.a = dx.ptr, fwd.b = dw1.ptr, fwd.c16 = y_l.ptr, fwd.bias = db1.ptr, fwd.relu_mask = mask.ptr;
    gpu::LtOperands back;
    back.a = dg.ptr, back.b = dw2.ptr, back.c16 = dy_l.ptr, back.relu_mask = mask.ptr;
    gpu::LtOperands grad;
    grad.a = dy_l.ptr, grad.b = dx.ptr, grad.c32 = dW_l.ptr, grad.bias_grad = db_l.ptr;
    gpu::LtGemm forward(0, f, false, true, B, h, in, Epilogue::BiasRelu, fwd);
    gpu::LtGemm input_grad(0, f, false, false, B, h, o, Epilogue::ReluBackward, back);
    gpu::LtGemm weight_grad(0, f, true, false, h, in, B, Epilogue::BiasGradient, grad);
    forward.run();
    input_grad.run();
    weight_grad.run();
    // the kernel path's dW and db from cuBLASLt's own dy: the BiasGradient GEMM alone
    gpu::gemm_half(0, f, true, false, h, in, B, 1.0f, dy_l.ptr, dx.ptr, 0.0f, dW_k.ptr);
    gpu::gemm_half(0, f, false, false, 1, h, B, 1.0f, ones.ptr, dy_l.ptr, 0.0f, db_k.ptr);

    const auto yk = widened(y_k.to_host(), f), yl = widened(y_l.to_host(), f);
    const auto dyk = widened(dy_k.to_host(), f), dyl = widened(dy_l.to_host(), f);
    int64_t y_outside = 0, mask_wrong = 0, mask_ambiguous = 0, dy_outside = 0;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < h; ++j) {
        const std::size_t at = std::size_t(i * h + j);
        const Dot a = dot_rows(xf, i, w1f, j, in);
        const double pre = a.value + b1f[std::size_t(j)];
        const double y_tol = 2 * sum_bound(in, a.size) + u * (std::fabs(a.value) + sum_bound(in, a.size)) +
                             rounding(u, yk[at], yl[at]) + 0x1p-22 * (std::fabs(a.value) + std::fabs(b1f[std::size_t(j)]));
        if (!(std::fabs(double(yl[at]) - yk[at]) <= y_tol)) ++y_outside;
        const bool on_k = yk[at] > 0.0f, on_l = yl[at] > 0.0f;
        if (on_k != on_l) {  // only where the pre-activation is within rounding of 0
          if (std::fabs(pre) > y_tol) ++mask_wrong;
          ++mask_ambiguous;
          continue;
        }
        if (!on_k) {
          if (dyk[at] != 0.0f || dyl[at] != 0.0f) ++mask_wrong;
          continue;
        }
        const Dot c = dot_rows(gf, i, w2t, j, o);
        const double dy_tol = 2 * sum_bound(o, c.size) + rounding(u, dyk[at], dyl[at]);
        if (!(std::fabs(double(dyl[at]) - dyk[at]) <= dy_tol)) ++dy_outside;
      }
    INFO("masks that disagree within rounding of 0: " << mask_ambiguous << " of " << B * h);
    CHECK(y_outside == 0);      // bias+ReLU: the forward values
    CHECK(mask_wrong == 0);     // the mask: zero gradient exactly where ReLU cut
    CHECK(dy_outside == 0);     // ReLU's backward: the unmasked gradient values

    // dW (h, in) and db (h) from the same 16-bit dy: two fp32 sums of one set of products
    const auto dWl = dW_l.to_host(), dWk = dW_k.to_host(), dbl = db_l.to_host(), dbk = db_k.to_host();
    int64_t dW_outside = 0, db_outside = 0;
    for (int64_t r = 0; r < h; ++r) {
      double db_size = 0;
      for (int64_t p = 0; p < B; ++p) db_size += std::fabs(dyl[std::size_t(p * h + r)]);
      if (!(std::fabs(double(dbl[std::size_t(r)]) - dbk[std::size_t(r)]) <= 2 * sum_bound(B, db_size))) ++db_outside;
      for (int64_t c = 0; c < in; ++c) {
        double size = 0;
        for (int64_t p = 0; p < B; ++p)
          size += std::fabs(double(dyl[std::size_t(p * h + r)]) * xf[std::size_t(p * in + c)]);
        const std::size_t at = std::size_t(r * in + c);
        if (!(std::fabs(double(dWl[at]) - dWk[at]) <= 2 * sum_bound(B, size))) ++dW_outside;
      }
    }
    CHECK(dW_outside == 0);  // the weight gradient dyᵀ·x
    CHECK(db_outside == 0);  // the bias gradient: dy's rows summed over the batch
  }
}

TEST_CASE("the last layer's cuBLASLt bias epilogue writes fp32 logits = the kernel path's GEMM plus the bias",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t B = 64, in = 200, classes = 10;  // classes: a leading dimension of 10, as the bench's
  Rng rng(12);
  const Half f = Half::BF16;
  const auto x = operand(B * in, f, rng), w = operand(classes * in, f, rng);
  std::vector<float> bias(static_cast<std::size_t>(classes));
  for (float& b : bias) b = rng.uniform(-1.0f, 1.0f);
  OnGpu<uint16_t> dx(x), dw(w);
  OnGpu<float> dbias(bias), logits_l(B * classes), logits_k(B * classes);
  gpu::LtOperands ops;
  ops.a = dx.ptr, ops.b = dw.ptr, ops.c32 = logits_l.ptr, ops.bias = dbias.ptr;
  gpu::LtGemm last(0, f, false, true, B, classes, in, Epilogue::Bias, ops);
  last.run();
  gpu::gemm_half(0, f, false, true, B, classes, in, 1.0f, dx.ptr, dw.ptr, 0.0f, logits_k.ptr);
  const auto l = logits_l.to_host(), k = logits_k.to_host();
  const auto xf = widened(x, f), wf = widened(w, f);
  int64_t outside = 0;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < classes; ++j) {
      const std::size_t at = std::size_t(i * classes + j);
      const double size = dot_rows(xf, i, wf, j, in).size + std::fabs(bias[std::size_t(j)]);
      const double expected = double(k[at]) + bias[std::size_t(j)];  // one more fp32 rounding: 2^-24 of it
      if (!(std::fabs(l[at] - expected) <= 2 * sum_bound(in, size) + 0x1p-23 * std::fabs(expected))) ++outside;
    }
  CHECK(outside == 0);
}

TEST_CASE("a cuBLASLt GEMM whose bias is not 16-byte aligned is refused with a sentence", "[gpu]") {
  DPT_REQUIRE_GPU();
  OnGpu<uint16_t> a(64 * 64), b(64 * 64), c(64 * 64), bias(72);
  gpu::LtOperands ops;
  ops.a = a.ptr, ops.b = b.ptr, ops.c16 = c.ptr, ops.bias = bias.ptr + 1;  // 2 bytes off
  CHECK_THROWS_WITH(gpu::LtGemm(0, Half::BF16, false, true, 64, 64, 64, Epilogue::Bias, ops),
                    contains_text("16-byte aligned"));
}
