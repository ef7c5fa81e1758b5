// test_batch_norm_kernels_emulated.cpp — batch normalization's GPU loops
// (common/backends/cuda/cuda_batch_norm.cuh, launched by cuda_launches.cuh)
// run here, every thread on the CPU emulator (support/cuda_emulator.h): first
// their plans (what grids the GPU will be asked for), then the specs of
// support/batch_norm_checks.h against the host path, which
// tests/gpu/test_gpu_batch_norm.cpp runs on cuda:0.
#include <cmath>
#include <vector>

#include "dpt/device.h"
#include "support/batch_norm_checks.h"
#include "support/catch.h"
#include "support/cuda_emulator.h"
#include "support/emulated_kernels.h"
#include "support/emulated_side.h"

namespace emulator = dpt_test::emulator;
namespace bn_checks = dpt_test::batch_norm_checks;
using dpt_test::emulated_side;  // the emulated GPU, its memory on cpu:1
using dpt::Device;

// ----------------------------------------------------------------------------
// the plans

TEST_CASE("emulated plans: batch moments are two column sums in sum_rows' chunks, each divided by the rows",
          "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  const int64_t rows = 130, cols = 40;  // 2 chunks of 65 rows; 2 column tiles, the second 8 columns wide
  std::vector<float> x(std::size_t(rows * cols), 3.0f), mean(std::size_t(cols), NAN), var(mean.size(), NAN);
  emulator::launches().clear();
  kernels.batch_moments(mean.data(), var.data(), x.data(), rows, cols);
  const auto& runs = emulator::launches();
  REQUIRE(runs.size() == 6);  // Σx's two passes, ÷ rows; Σ(x − mean)²'s two passes, ÷ rows
  for (std::size_t pass : {0, 3}) CHECK((runs[pass].grid.x == 2 && runs[pass].grid.y == 2));
  for (std::size_t pass : {1, 4}) CHECK((runs[pass].grid.x == 2 && runs[pass].grid.y == 1));
  for (std::size_t pass : {2, 5}) CHECK((runs[pass].grid.x == 2 && runs[pass].block.x == 32));
  CHECK(mean == std::vector<float>(std::size_t(cols), 3.0f));  // every column, the last tile's too
  CHECK(var == std::vector<float>(std::size_t(cols), 0.0f));
}

TEST_CASE("emulated plans: batch norm's backward sums are one pass each under 128 rows", "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  const int64_t rows = 7, cols = 33;
  std::vector<float> dy(std::size_t(rows * cols), 1.0f), xhat(dy.size(), 2.0f), s1(std::size_t(cols), NAN), s2(s1);
  emulator::launches().clear();
  kernels.batch_norm_gradient_sums(s1.data(), s2.data(), dy.data(), xhat.data(), rows, cols);
  REQUIRE(emulator::launches().size() == 2);
  CHECK(s1 == std::vector<float>(std::size_t(cols), 7.0f));
  CHECK(s2 == std::vector<float>(std::size_t(cols), 14.0f));
}

// ----------------------------------------------------------------------------
// the specs, on the emulator

TEST_CASE("emulated cuda batch_moments match the host path's mean and variance, offset columns included",
          "[emulator]") {
  bn_checks::moments_match_host(emulated_side());
}
TEST_CASE("emulated cuda batch_norm normalizes like the host path and updates the running statistics",
          "[emulator]") {
  bn_checks::forward_matches_host(emulated_side());
}
TEST_CASE("emulated cuda batch norm's backward sums and dx match the host path, over more rows than its own too",
          "[emulator]") {
  bn_checks::backward_matches_host(emulated_side());
}
TEST_CASE("emulated cuda batch_norm_inference matches the host path, one row included", "[emulator]") {
  bn_checks::inference_matches_host(emulated_side());
}
TEST_CASE("emulated cuda batch norm over no rows: gradient sums are 0, the rest writes nothing", "[emulator]") {
  auto& k = dpt_test::emulated_cuda_kernels();
  std::vector<float> guard = {NAN}, s1 = {NAN, NAN}, s2 = {NAN, NAN};
  k.batch_norm_gradient_sums(s1.data(), s2.data(), nullptr, nullptr, 0, 2);
  CHECK(s1 == std::vector<float>{0.0f, 0.0f});
  CHECK(s2 == std::vector<float>{0.0f, 0.0f});
  k.batch_norm_backward(guard.data(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 2, 0, 3);
  k.batch_norm_inference(guard.data(), nullptr, nullptr, nullptr, nullptr, nullptr, 0, 3, 1e-5f);
  k.batch_moments(guard.data(), guard.data(), nullptr, 5, 0);
  CHECK(std::isnan(guard[0]));
  CHECK_THROWS_WITH(k.batch_moments(guard.data(), guard.data(), nullptr, 0, 3), contains_text("no rows"));
}
