// test_kernels_emulated.cpp — the GPU's kernel code, run here: the CUDA
// kernels of common/backends/cuda/ compiled as C++, launched with the grids
// cuda_launches.cuh plans, every thread run on the CPU emulator
// (support/cuda_emulator.h). First the emulator itself (its built-ins, its
// refusals), then the plans (how many launches, what grids), then every spec
// the GPU tests hold cuda:0 to (support/kernel_checks.h), on every machine,
// with or without a GPU.
#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "dpt/device.h"
#include "support/catch.h"
#include "support/cuda_emulator.h"
#include "support/emulated_kernels.h"
#include "support/emulated_side.h"
#include "support/kernel_checks.h"

namespace emulator = dpt_test::emulator;
namespace checks = dpt_test::kernel_checks;
using dpt::Device;

namespace {

// The emulated GPU's memory is cpu:1; its CPU twin's, cpu:0.
using dpt_test::emulated_side;

// ----------------------------------------------------------------------------
// kernels for the emulator's own tests

// out[global thread] = its (block, thread) coordinates, flattened; count[] +1.
__global__ void coordinates_kernel(int* out, int* count) {
  unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  unsigned global = block * (blockDim.x * blockDim.y * blockDim.z) + thread;
  out[global] = int(block * 10000 + thread);
  count[global] += 1;
}

// Thread 0 leaves before the barrier the others wait at.
__global__ void early_return_kernel(float* out) {
  __shared__ float shared[64];
  if (threadIdx.x == 0) return;
  shared[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = shared[(threadIdx.x + 1) % 64];
}

// Odd and even threads wait at two different barriers.
__global__ void split_barrier_kernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void throwing_kernel(float*) {
  if (blockIdx.x == 1 && threadIdx.x == 3) throw std::runtime_error("planted");
}

// Launches a kernel from a kernel (CUDA's dynamic parallelism).
__global__ void nested_kernel(float* out) {
  if (threadIdx.x == 0) emulator::Launch{}(throwing_kernel, dim3(1), dim3(1), out);
}

// Each thread writes its shared slot, then reads its neighbour's: right only
// if the barrier holds every write back until all are done.
__global__ void rotate_kernel(int* out) {
  __shared__ int shared[128];
  shared[threadIdx.x] = int(blockIdx.x * 1000 + threadIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = shared[(threadIdx.x + 1) % blockDim.x];
}

std::string launch_error(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ----------------------------------------------------------------------------
// the emulator

TEST_CASE("emulator: every thread of every block runs once, with its own threadIdx and blockIdx", "[emulator]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int total = 3 * 2 * 2 * 4 * 3 * 2;
  std::vector<int> out(total, -1), count(total, 0);
  emulator::Launch launch;
  launch(coordinates_kernel, grid, block, out.data(), count.data());
  CHECK(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));
  std::set<int> seen(out.begin(), out.end());
  CHECK(int(seen.size()) == total);
  CHECK(out[0] == 0);
  CHECK(out[total - 1] == (12 - 1) * 10000 + (24 - 1));  // the last block's last thread
}

TEST_CASE("emulator: __syncthreads holds every shared write until the whole block is done", "[emulator]") {
  std::vector<int> out(3 * 128);
  emulator::Launch launch;
  launch(rotate_kernel, dim3(3), dim3(128), out.data());
  int wrong = 0;
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 128; ++t) wrong += out[std::size_t(b * 128 + t)] != b * 1000 + (t + 1) % 128;
  CHECK(wrong == 0);
}

TEST_CASE("emulator: a launch CUDA would refuse is refused with a sentence", "[emulator]") {
  std::vector<float> out(2048);
  emulator::Launch launch;
  for (auto [grid, block, why] : {std::tuple{dim3(0), dim3(32), "an empty grid or block"},
                                  std::tuple{dim3(1), dim3(0), "an empty grid or block"},
                                  std::tuple{dim3(1), dim3(1025), "1025 threads a block"},
                                  std::tuple{dim3(1), dim3(32, 32, 2), "2048 threads a block"},
                                  std::tuple{dim3(1, 65536), dim3(32), "a grid beyond"}}) {
    std::string error = launch_error([&] { launch(throwing_kernel, grid, block, out.data()); });
    INFO(error);
    CHECK(error.find(why) != std::string::npos);
    CHECK(error.find("invalid configuration") != std::string::npos);
  }
}

TEST_CASE("emulator: threads of a block at different barriers fail the launch, naming them", "[emulator]") {
  std::vector<float> out(64);
  emulator::Launch launch;
  std::string early = launch_error([&] { launch(early_return_kernel, dim3(2), dim3(64), out.data()); });
  INFO(early);
  CHECK(early.find("block (0, 0, 0)") != std::string::npos);
  CHECK(early.find("the end of the kernel") != std::string::npos);
  CHECK(early.find("__syncthreads() at") != std::string::npos);
  CHECK(early.find("undefined behaviour") != std::string::npos);

  std::string split = launch_error([&] { launch(split_barrier_kernel, dim3(1), dim3(8), out.data()); });
  INFO(split);
  CHECK(split.find("test_kernels_emulated.cpp:") != std::string::npos);
  CHECK(split.find("must reach the same barriers") != std::string::npos);

  // and the emulator is usable again afterwards
  std::vector<int> rotated(128);
  launch(rotate_kernel, dim3(1), dim3(128), rotated.data());
  CHECK(rotated[0] == 1);
}

TEST_CASE("emulator: a thread that throws fails the launch with its coordinates", "[emulator]") {
  std::vector<float> out(64);
  emulator::Launch launch;
  std::string error = launch_error([&] { launch(throwing_kernel, dim3(2), dim3(8), out.data()); });
  INFO(error);
  CHECK(error.find("block (1, 0, 0), thread (3, 0, 0) threw: planted") != std::string::npos);
  std::string nested = launch_error([&] { launch(nested_kernel, dim3(1), dim3(4), out.data()); });
  INFO(nested);
  CHECK(nested.find("dynamic parallelism is not emulated") != std::string::npos);
}

// ----------------------------------------------------------------------------
// the plans: what the GPU will be asked to launch

TEST_CASE("emulated plans: sum_rows takes one pass under 128 rows, two with up to 64 row chunks above", "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  std::vector<float> dy(4097 * 70, 1.0f), dbias(70);
  using Plan = std::tuple<int64_t, int, unsigned>;  // rows, passes, row chunks
  std::vector<Plan> plans = {{0, 1, 1}, {127, 1, 1}, {128, 2, 2}, {4096, 2, 64}, {4097, 2, 64}};
  if (!emulator::kFast) plans.resize(3);  // 4096 rows: 192 blocks of 256 threads, long on threads
  for (auto [rows, passes, chunks] : plans) {
    INFO(rows << " rows");
    emulator::launches().clear();
    kernels.sum_rows(dbias.data(), dy.data(), rows, 70);
    const auto& runs = emulator::launches();
    REQUIRE(int(runs.size()) == passes);
    CHECK(runs[0].grid.x == 3);  // 70 columns: three tiles of 32
    CHECK(runs[0].grid.y == chunks);
    CHECK((runs[0].block.x == 32 && runs[0].block.y == 8));
    CHECK(runs.back().grid.y == 1);
    CHECK(dbias[69] == float(rows));  // ones: each column sums to the row count
  }
}

TEST_CASE("emulated plans: elementwise grids stop at 8192 blocks, reductions at 1024, then threads stride",
          "[emulator]") {
  auto& kernels = dpt_test::emulated_cuda_kernels();
  // Past one full grid (8192 blocks × 256 threads), so every thread's
  // grid-stride loop takes a second turn; kFast only (2M elements).
  const int64_t n = emulator::kFast ? 8192 * 256 + 1001 : 3001;
  std::vector<float> a(std::size_t(n), 1.0f), b(std::size_t(n), 2.0f), out(std::size_t(n), 0.0f);
  emulator::launches().clear();
  kernels.add(out.data(), a.data(), b.data(), n);
  REQUIRE(emulator::launches().size() == 1);
  CHECK(emulator::launches()[0].grid.x == unsigned(std::min<int64_t>(8192, (n + 255) / 256)));
  CHECK(std::count(out.begin(), out.end(), 3.0f) == n);

  emulator::launches().clear();
  float total = 0;
  kernels.sum(&total, a.data(), n);
  REQUIRE(emulator::launches().size() == 2);
  CHECK(emulator::launches()[0].grid.x == unsigned(std::min<int64_t>(1024, (n + 255) / 256)));
  CHECK(emulator::launches()[1].grid.x == 1);
  CHECK(total == float(n));  // exact: n < 2²⁴
}

TEST_CASE("emulated gemm refuses with a sentence: cuBLAS is not emulated", "[emulator]") {
  float a = 1, b = 1, c = 0;
  CHECK_THROWS_WITH(dpt_test::emulated_cuda_kernels().gemm(false, false, 1, 1, 1, 1.0f, &a, &b, 0.0f, &c),
                    contains_text("cuBLAS"));
}

// ----------------------------------------------------------------------------
// the GPU kernel specs, on the emulator

TEST_CASE("emulated cuda elementwise kernels equal their CPU twins bit for bit", "[emulator]") {
  checks::elementwise_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda add_bias equals the CPU's, sum_rows matches it to summation order", "[emulator]") {
  checks::bias_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda sum_rows matches a double column sum within float rounding, small integers exactly",
          "[emulator]") {
  checks::sum_rows_match_oracle(emulated_side());
}
TEST_CASE("emulated cuda sum_rows gives the same bits on every call and after other shapes", "[emulator]") {
  checks::sum_rows_same_bits(emulated_side());
}
TEST_CASE("emulated cuda sum and sum_squares match the CPU to summation order", "[emulator]") {
  checks::sums_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda sum and sum_squares of small integers are exact", "[emulator]") {
  checks::integer_sums_exact(emulated_side());
}
TEST_CASE("emulated cuda kernels over 0 elements write nothing, and their reductions give 0", "[emulator]") {
  checks::empty_inputs(emulated_side());
}
TEST_CASE("emulated cuda softmax-cross-entropy and its backward match the CPU's double-precision rows", "[emulator]") {
  checks::softmax_cross_entropy_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda optimizer steps match the CPU's update rules to an ulp or two", "[emulator]") {
  checks::optimizers_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda LARS and LAMB layer steps match the CPU's, zero norms included", "[emulator]") {
  checks::layerwise_optimizers_match_cpu(emulated_side());
}
TEST_CASE("emulated cuda count_correct equals the CPU's count, ties and out-of-range labels included", "[emulator]") {
  checks::count_correct_matches_cpu(emulated_side());
}
TEST_CASE("emulated cuda max_abs_diff equals the CPU's and reports a NaN in any block as NaN", "[emulator]") {
  checks::max_abs_diff_matches_cpu(emulated_side());
}
