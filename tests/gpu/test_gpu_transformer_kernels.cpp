// test_gpu_transformer_kernels.cpp — a transformer's loops on cuda:0: the
// specs of support/transformer_checks.h and transformer_row_checks.h (the
// emulator runs them too, tests/core/test_transformer_kernels_emulated.cpp),
// at GPU sizes, and what only a GPU has: cuBLAS's strided-batched GEMM
// against a loop of gemm, and the embedding backward's same bits on every call.
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/tensor.h"
#include "support/gpu.h"
#include "support/kernel_checks.h"
#include "support/transformer_checks.h"
#include "support/transformer_row_checks.h"
#include "support/twins.h"

using namespace dpt;
namespace checks = dpt_test::transformer_checks;

namespace {
dpt_test::kernel_checks::Side gpu_side() {
  return {cuda_kernels(0), Device::cuda(0), dpt_test::kernel_checks::Sizes::gpu};
}
}  // namespace

TEST_CASE("cuda embedding gathers rows and its backward adds them in position order, bit for bit", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::embedding_matches_oracle(gpu_side());
}
TEST_CASE("cuda swap_axes_12 moves every element to its swapped place", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::swap_matches_oracle(gpu_side());
}
TEST_CASE("cuda copy_columns copies the block both ways and writes nothing outside it", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::copy_columns_matches_oracle(gpu_side());
}
TEST_CASE("cuda gelu and its backward match the tanh form within their roundings, past a full grid", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::gelu_match_oracle(gpu_side(), 8192 * 256 + 1001);
}
TEST_CASE("cuda layer_norm and its backward match double rows to summation order", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::layer_norm_matches_oracle(gpu_side());
}
TEST_CASE("cuda softmax masks exactly (0, x never read) and matches double rows to summation order", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::softmax_matches_oracle(gpu_side());
}

TEST_CASE("cuda embedding backward gives the same bits on every call (no atomics)", "[gpu]") {
  DPT_REQUIRE_GPU();
  // 65 tokens over 12 × 64 positions: each row of the table adds ~12 rows, in
  // an order that atomics would leave to the scheduler.
  const int64_t n = 768, cols = 128, vocab = 65;
  std::vector<int64_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[std::size_t(i)] = (i * 37 + i / 7) % vocab;
  Tensor dout = dpt_test::twin({n, cols}, 20).gpu, first;
  for (int call = 0; call < 5; ++call) {
    Tensor dtable = Tensor::zeros({vocab, cols}, Device::cuda(0));
    cuda_kernels(0).embedding_backward(dtable.data(), dout.data(), tokens.data(), n, cols);
    if (call == 0) first = dtable.clone();
    else CHECK(dpt_test::kernel_checks::same_bits(dtable.to_vector(), first.to_vector()));
  }
}

TEST_CASE("cuda gemm_batched equals a loop of gemm over the batch, transposes, strides and beta included", "[gpu]") {
  DPT_REQUIRE_GPU();
  struct Case { bool ta, tb; int64_t m, n, k, batch, pad, shift; float beta; };
  // attention's shapes (12 × 4 heads of 64 × 32), odd ones, one product,
  // strides with a gap between products, an accumulating beta, operands one
  // float off a 256-byte boundary (the aligned copies, gaps included)
  for (Case c : {Case{false, true, 64, 64, 32, 48, 0, 0, 0.0f}, Case{false, false, 64, 32, 64, 48, 0, 0, 0.0f},
                 Case{true, false, 7, 5, 3, 3, 5, 0, 0.5f}, Case{true, true, 1, 1, 1, 1, 0, 0, 1.0f},
                 Case{false, false, 33, 17, 300, 5, 3, 0, -2.0f}, Case{true, false, 7, 5, 3, 3, 5, 1, 0.0f}}) {
    INFO("op(a) " << c.m << " x " << c.k << (c.ta ? " (t)" : "") << ", op(b) " << c.k << " x " << c.n
                  << (c.tb ? " (t)" : "") << ", batch " << c.batch << ", gap " << c.pad << ", beta " << c.beta
                  << ", offset " << c.shift);
    const int64_t sa = c.m * c.k + c.pad, sb = c.k * c.n + c.pad, sc = c.m * c.n + c.pad, at = c.shift;
    auto a = dpt_test::twin({c.batch * sa + at}, 21), b = dpt_test::twin({c.batch * sb + at}, 22);
    auto batched = dpt_test::twin({c.batch * sc + at}, 23);
    Tensor looped = batched.gpu.clone();
    cuda_kernels(0).gemm_batched(c.ta, c.tb, c.m, c.n, c.k, 0.75f, a.gpu.data() + at, sa, b.gpu.data() + at, sb,
                                 c.beta, batched.gpu.data() + at, sc, c.batch);
    for (int64_t i = 0; i < c.batch; ++i)
      cuda_kernels(0).gemm(c.ta, c.tb, c.m, c.n, c.k, 0.75f, a.gpu.data() + at + i * sa, b.gpu.data() + at + i * sb,
                           c.beta, looped.data() + at + i * sc);
    // Two cuBLAS kernels may sum k in other orders: ~√k·2⁻²⁴ of the largest
    // entry each; 1e-5 normwise leaves room for k = 300, not for a wrong product.
    CHECK(dpt_test::relative_diff(batched.gpu, looped) <= 1e-5);
    // the gaps between products are never written
    std::vector<float> got = batched.gpu.to_vector(), before = batched.cpu.to_vector();
    int64_t gaps_written = 0;
    for (int64_t i = 0; i < c.batch; ++i)
      for (int64_t j = at + i * sc + c.m * c.n; j < at + (i + 1) * sc; ++j)
        gaps_written += got[std::size_t(j)] != before[std::size_t(j)];
    if (at) CHECK(got[0] == before[0]);  // nor the float before the first
    CHECK(gaps_written == 0);
  }
}
