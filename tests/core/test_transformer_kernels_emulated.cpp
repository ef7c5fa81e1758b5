// test_transformer_kernels_emulated.cpp — a transformer's GPU loops
// (common/backends/cuda/cuda_transformer.cuh, launched by cuda_launches.cuh)
// run here, every thread on the CPU emulator (support/cuda_emulator.h): first
// their plans (what grids the GPU will be asked for), then the specs of
// support/transformer_checks.h and transformer_row_checks.h, which
// tests/gpu/test_gpu_transformer_kernels.cpp runs on cuda:0.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernel_math.h"
#include "support/catch.h"
#include "support/cuda_emulator.h"
#include "support/emulated_kernels.h"
#include "support/emulated_side.h"
#include "support/transformer_checks.h"
#include "support/transformer_row_checks.h"

namespace emulator = dpt_test::emulator;
namespace tf_checks = dpt_test::transformer_checks;
using dpt_test::emulated_side;  // the emulated GPU, its memory on cpu:1
using dpt::Device;

// ----------------------------------------------------------------------------
// the plans

TEST_CASE("emulated plans: a row-wise loop is one block a row up to 1024 blocks, which then stride over rows",
          "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  const int64_t cols = 3;
  for (int64_t rows : emulator::kFast ? std::vector<int64_t>{1, 7, 1025} : std::vector<int64_t>{1, 7}) {
    INFO(rows << " rows");
    std::vector<float> x(std::size_t(rows * cols), 1.0f), y(x.size(), 0.0f);
    emulator::launches().clear();
    kernels.softmax(y.data(), x.data(), rows, cols, 0);
    REQUIRE(emulator::launches().size() == 1);
    CHECK(emulator::launches()[0].grid.x == unsigned(std::min<int64_t>(rows, 1024)));
    CHECK(emulator::launches()[0].block.x == 256);
    CHECK(std::count(y.begin(), y.end(), 1.0f / 3.0f) == rows * cols);  // every row written, the last too
  }
}

TEST_CASE("emulated plans: layer norm's backward sums dweight and dbias in sum_rows' row chunks", "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  const int64_t rows = 130, cols = 40;  // 2 chunks of 65 rows, 2 column tiles
  std::vector<float> x(std::size_t(rows * cols), 1.0f), stats(std::size_t(rows), 0.0f), w(std::size_t(cols), 1.0f);
  std::vector<float> dx(x.size()), dw(w.size()), db(w.size());
  emulator::launches().clear();
  kernels.layer_norm_backward(dx.data(), dw.data(), db.data(), x.data(), x.data(), stats.data(), stats.data(),
                              w.data(), rows, cols);
  const auto& runs = emulator::launches();
  REQUIRE(runs.size() == 5);  // dx; dbias's two passes; dweight's two
  CHECK(runs[0].grid.x == unsigned(rows));
  for (std::size_t pass : {1, 3}) CHECK((runs[pass].grid.x == 2 && runs[pass].grid.y == 2));
  for (std::size_t pass : {2, 4}) CHECK((runs[pass].grid.x == 2 && runs[pass].grid.y == 1));
  CHECK(db[39] == float(rows));
}

TEST_CASE("emulated plans: the embedding backward runs one thread per (distinct token, column)", "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  const std::vector<int64_t> tokens = {3, 1, 3, 3, 0, 1};  // three distinct
  std::vector<float> dtable(4 * 2, 0.0f), dout(tokens.size() * 2, 1.0f);
  emulator::launches().clear();
  kernels.embedding_backward(dtable.data(), dout.data(), tokens.data(), int64_t(tokens.size()), 2);
  REQUIRE(emulator::launches().size() == 1);
  CHECK(emulator::launches()[0].grid.x == 1);  // 3 × 2 threads: one block
  CHECK(dtable == std::vector<float>{1, 1, 2, 2, 0, 0, 3, 3});
}

TEST_CASE("emulated gemm_batched refuses with a sentence: cuBLAS is not emulated", "[emulator]") {
  float a = 1, b = 1, c = 0;
  CHECK_THROWS_WITH(
      dpt_test::emulated_cuda_kernels().gemm_batched(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1, 1),
      contains_text("cuBLAS"));
}

// ----------------------------------------------------------------------------
// the specs, on the emulator

TEST_CASE("emulated cuda embedding gathers rows and its backward adds them in position order, bit for bit",
          "[emulator]") {
  tf_checks::embedding_matches_oracle(emulated_side());
}
TEST_CASE("emulated cuda swap_axes_12 moves every element to its swapped place", "[emulator]") {
  tf_checks::swap_matches_oracle(emulated_side());
}
TEST_CASE("emulated cuda copy_columns copies the block both ways and writes nothing outside it", "[emulator]") {
  tf_checks::copy_columns_matches_oracle(emulated_side());
}
TEST_CASE("emulated cuda gelu and its backward match the tanh form within their roundings", "[emulator]") {
  tf_checks::gelu_match_oracle(emulated_side(), 1001);
}
TEST_CASE("emulated cuda gelu is kernel_math's per element bit for bit, also past a full elementwise grid",
          "[emulator]") {
  // The kernel applies math::gelu to each element: on the emulator (the
  // same compiler) every element must be exactly that, wherever the grid's
  // stride puts it. Past 8192 × 256 elements on fibers, so threads stride twice.
  const int64_t n = emulator::kFast ? 8192 * 256 + 1001 : 3001;
  std::vector<float> x = tf_checks::uniform(n, 15, -6.0f, 6.0f), dout = tf_checks::uniform(n, 16), out(x.size(), NAN);
  std::vector<float> want(x.size()), dwant(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    want[i] = dpt::math::gelu(x[i]), dwant[i] = dpt::math::gelu_backward(x[i], dout[i]);
  dpt_test::emulated_cuda_kernels().gelu(out.data(), x.data(), n);
  CHECK(tf_checks::bits_off(out, want) == 0);
  dpt_test::emulated_cuda_kernels().gelu_backward(out.data(), x.data(), dout.data(), n);
  CHECK(tf_checks::bits_off(out, dwant) == 0);
}
TEST_CASE("emulated cuda layer_norm and its backward match double rows to summation order", "[emulator]") {
  tf_checks::layer_norm_matches_oracle(emulated_side());
}
TEST_CASE("emulated cuda softmax masks exactly (0, x never read) and matches double rows to summation order",
          "[emulator]") {
  tf_checks::softmax_matches_oracle(emulated_side());
}
TEST_CASE("emulated cuda transformer loops of nothing write nothing", "[emulator]") {
  auto& k = dpt_test::emulated_cuda_kernels();
  std::vector<float> guard = {NAN};
  const int64_t token = 0;
  k.embedding(guard.data(), nullptr, &token, 0, 3);
  k.embedding_backward(guard.data(), nullptr, &token, 0, 3);
  k.layer_norm(guard.data(), guard.data(), guard.data(), nullptr, nullptr, nullptr, 0, 3, 1e-5f);
  k.gelu(guard.data(), nullptr, 0);
  k.softmax(guard.data(), nullptr, 0, 3, 3);
  k.softmax_backward(guard.data(), nullptr, nullptr, 3, 0);
  k.swap_axes_12(guard.data(), nullptr, 2, 0, 3, 4);
  k.copy_columns(guard.data(), 3, nullptr, 3, 0, 3);
  CHECK(std::isnan(guard[0]));
}
