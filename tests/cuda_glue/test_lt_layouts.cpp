// test_lt_layouts.cpp — common/backends/cuda/cuda_half_lt.cpp's mapping of
// dpt's row-major GEMM onto cuBLASLt's column-major one, run against the
// cuBLASLt stand-in (support/cuda_standin/cublasLt.h: written from cuBLASLt's
// documentation in its own terms) on a machine without a GPU. Every value is
// a small integer, exact in bf16 and in float sums, so results are compared
// exactly: a swapped operand, transpose, leading dimension, bias vector
// orientation or mask layout gives a different number, never a close one.
// What only a GPU can show (that cuBLASLt accepts these plans, and its
// rounding) is tests/gpu/test_gpu_half_lt.cpp's.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half_lt.h"
#include "support/catch.h"
#include "support/cuda_standin/standin.h"

namespace gpu = dpt::gpu;
namespace standin = dpt_test::standin;
using gpu::Epilogue;
using dpt::Half;

namespace {

uint16_t bf16(float x) {  // x a small integer: exact, its top 16 bits
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return uint16_t(bits >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// n small integers in [-3, 3], from a fixed recurrence.
std::vector<float> ints(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = float(int((seed = seed * 1103515245u + 12345u) >> 16) % 7 - 3);
  return v;
}

// T values in the stand-in's GPU memory (host memory: read once synchronized).
template <typename T>
T* on_gpu(const std::vector<T>& host) {
  auto* p = static_cast<T*>(gpu::allocate(0, host.size() * sizeof(T)));
  std::memcpy(p, host.data(), host.size() * sizeof(T));
  return p;
}
std::vector<uint16_t> as_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = bf16(v[i]);
  return h;
}

// dpt's row-major c (m, n) = op(a)·op(b): a stored (m, k), or (k, m) when ta.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b, bool ta, bool tb, int64_t m,
                             int64_t n, int64_t k) {
  std::vector<float> c(static_cast<std::size_t>(m * n), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[std::size_t(i * n + j)] += a[std::size_t(ta ? p * m + i : i * k + p)] * b[std::size_t(tb ? j * k + p : p * n + j)];
  return c;
}

}  // namespace

TEST_CASE("an LtGemm with the bias epilogue computes dpt's row-major op(a)·op(b) + one bias per column, for every "
          "transpose",
          "[glue][lt]") {
  standin::reset({1, 16 << 20});
  const int64_t m = 3, n = 5, k = 7;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose_a " << ta << ", transpose_b " << tb);
      const auto a = ints(m * k, 1), b = ints(k * n, 2), bias = ints(n, 3);
      uint16_t *da = on_gpu(as_bf16(a)), *db = on_gpu(as_bf16(b));
      float *dbias = on_gpu(bias), *dc = on_gpu(std::vector<float>(std::size_t(m * n), -99.0f));
      gpu::LtOperands ops;
      ops.a = da, ops.b = db, ops.c32 = dc, ops.bias = dbias;
      gpu::LtGemm gemm(0, Half::BF16, ta, tb, m, n, k, Epilogue::Bias, ops);
      gemm.run();
      gpu::synchronize(0);
      const auto ref = reference(a, b, ta, tb, m, n, k);
      int64_t wrong = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) wrong += dc[i * n + j] != ref[std::size_t(i * n + j)] + bias[std::size_t(j)];
      CHECK(wrong == 0);
      for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dbias), static_cast<void*>(dc)})
        gpu::free(0, p);
    }
}

TEST_CASE("an LtGemm's bias+ReLU mask, 130 columns wide, is read back by ReluBackward where the forward was "
          "positive, and nowhere else",
          "[glue][lt]") {
  standin::reset({1, 16 << 20});
  const int64_t m = 4, n = 130, k = 6, k2 = 3;  // a mask row of 256 bits: its padding is skipped
  const auto x = ints(m * k, 4), w = ints(n * k, 5), bias = ints(n, 6), g = ints(m * k2, 7), w2 = ints(k2 * n, 8);
  uint16_t *dx = on_gpu(as_bf16(x)), *dw = on_gpu(as_bf16(w)), *dbias = on_gpu(as_bf16(bias));
  uint16_t *dg = on_gpu(as_bf16(g)), *dw2 = on_gpu(as_bf16(w2));
  uint16_t *dy = on_gpu(std::vector<uint16_t>(std::size_t(m * n))), *ddx = on_gpu(std::vector<uint16_t>(std::size_t(m * n)));
  auto* mask = on_gpu(std::vector<unsigned char>(std::size_t(gpu::relu_mask_bytes(m, n)), 0xff));
  gpu::LtOperands fwd;  // y (m, n) = relu(x·wᵀ + bias)
  fwd.a = dx, fwd.b = dw, fwd.c16 = dy, fwd.bias = dbias, fwd.relu_mask = mask;
  gpu::LtOperands back;  // dx (m, n) = g·w2, where y > 0
  back.a = dg, back.b = dw2, back.c16 = ddx, back.relu_mask = mask;
  gpu::LtGemm forward(0, Half::BF16, false, true, m, n, k, Epilogue::BiasRelu, fwd);
  gpu::LtGemm backward(0, Half::BF16, false, false, m, n, k2, Epilogue::ReluBackward, back);
  forward.run();
  backward.run();
  gpu::synchronize(0);
  const auto pre = reference(x, w, false, true, m, n, k), grad = reference(g, w2, false, false, m, n, k2);
  int64_t y_wrong = 0, dx_wrong = 0, positive = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const std::size_t at = std::size_t(i * n + j);
      const float v = pre[at] + bias[std::size_t(j)];
      positive += v > 0;
      y_wrong += from_bf16(dy[at]) != (v > 0 ? v : 0.0f);
      dx_wrong += from_bf16(ddx[at]) != (v > 0 ? grad[at] : 0.0f);
    }
  INFO(positive << " of " << m * n << " pre-activations positive");
  CHECK(positive > 0);
  CHECK(positive < m * n);
  CHECK(y_wrong == 0);
  CHECK(dx_wrong == 0);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(dbias), static_cast<void*>(dg),
                  static_cast<void*>(dw2), static_cast<void*>(dy), static_cast<void*>(ddx), static_cast<void*>(mask)})
    gpu::free(0, p);
}

TEST_CASE("an LtGemm with the bias-gradient epilogue writes dW = dyᵀ·x and db = dy summed over the batch",
          "[glue][lt]") {
  standin::reset({1, 16 << 20});
  const int64_t batch = 6, out = 5, in = 3;  // dW (out, in) = dyᵀ (out, batch) · x (batch, in)
  const auto dy = ints(batch * out, 9), x = ints(batch * in, 10);
  uint16_t *ddy = on_gpu(as_bf16(dy)), *dx = on_gpu(as_bf16(x));
  float *dW = on_gpu(std::vector<float>(std::size_t(out * in))), *db = on_gpu(std::vector<float>(std::size_t(out)));
  gpu::LtOperands ops;
  ops.a = ddy, ops.b = dx, ops.c32 = dW, ops.bias_grad = db;
  gpu::LtGemm gemm(0, Half::BF16, true, false, out, in, batch, Epilogue::BiasGradient, ops);
  gemm.run();
  gpu::synchronize(0);
  const auto ref = reference(dy, x, true, false, out, in, batch);
  int64_t dW_wrong = 0, db_wrong = 0;
  for (int64_t o = 0; o < out; ++o) {
    float sum = 0;
    for (int64_t b = 0; b < batch; ++b) sum += dy[std::size_t(b * out + o)];
    db_wrong += db[o] != sum;
    for (int64_t i = 0; i < in; ++i) dW_wrong += dW[o * in + i] != ref[std::size_t(o * in + i)];
  }
  CHECK(dW_wrong == 0);
  CHECK(db_wrong == 0);
  for (void* p : {static_cast<void*>(ddy), static_cast<void*>(dx), static_cast<void*>(dW), static_cast<void*>(db)})
    gpu::free(0, p);
}

TEST_CASE("an LtGemm run() queues on the thread's current stream, so a CUDA graph captures it and a replay "
          "runs it",
          "[glue][lt]") {
  standin::reset({1, 16 << 20});
  const auto a = ints(2 * 3, 11), b = ints(3 * 4, 12), bias = ints(4, 13);
  uint16_t *da = on_gpu(as_bf16(a)), *db = on_gpu(as_bf16(b));
  float *dbias = on_gpu(bias), *dc = on_gpu(std::vector<float>(8, -99.0f));
  gpu::LtOperands ops;
  ops.a = da, ops.b = db, ops.c32 = dc, ops.bias = dbias;
  gpu::LtGemm gemm(0, Half::BF16, false, false, 2, 4, 3, Epilogue::Bias, ops);
  gpu::Graph graph;
  graph.capture(gpu::current_stream(0), [&] { gemm.run(); });
  gpu::synchronize(0);
  CHECK(dc[0] == -99.0f);  // recorded, not run
  graph.replay(gpu::current_stream(0));
  gpu::synchronize(0);
  const auto ref = reference(a, b, false, false, 2, 4, 3);
  CHECK(dc[0] == ref[0] + bias[0]);
  CHECK(dc[7] == ref[7] + bias[3]);
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dbias), static_cast<void*>(dc)})
    gpu::free(0, p);
}

TEST_CASE("an LtGemm cuBLASLt refuses is a sentence naming the call and the status, before anything is queued",
          "[glue][lt]") {
  standin::reset({1, 16 << 20});
  auto* a = on_gpu(std::vector<uint16_t>(16)), *b = on_gpu(std::vector<uint16_t>(16));
  auto* c = on_gpu(std::vector<float>(16));
  gpu::LtOperands ops;
  ops.a = a, ops.b = b, ops.c32 = c;
  ops.bias_grad = c;
  // the stand-in models bf16 only, so fp16 is refused as cuBLASLt refuses what it cannot do
  CHECK_THROWS_WITH(gpu::LtGemm(0, Half::FP16, true, false, 4, 4, 4, Epilogue::BiasGradient, ops),
                    contains_text("cublasLtMatmulAlgoGetHeuristic") && contains_text("CUBLAS_STATUS_NOT_SUPPORTED") &&
                        contains_text("bias gradient GEMM (4, 4, 4) fp16"));
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c)}) gpu::free(0, p);
}
