// test_gpu_kernels.cpp — every function of the CUDA kernels (kernels.h on
// cuda:0) against its CPU twin on the same inputs: the specs of
// support/kernel_checks.h (where the tolerances are argued), which
// tests/core/test_kernels_emulated.cpp also runs on the CPU emulator of the
// same kernel code, plus what only a GPU has: CUDA graphs and cuBLAS.
#include <vector>

#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "support/gemm_offsets.h"
#include "support/gpu.h"
#include "support/kernel_checks.h"
#include "support/twins.h"

using namespace dpt;
namespace checks = dpt_test::kernel_checks;

namespace {
checks::Side gpu_side() { return {cuda_kernels(0), Device::cuda(0), checks::Sizes::gpu}; }
}  // namespace

TEST_CASE("kernels_for(cuda:0) is the CUDA kernels of GPU 0", "[gpu]") {
  DPT_REQUIRE_GPU();
  CHECK(&kernels_for(Device::cuda(0)) == &cuda_kernels(0));
  CHECK(&kernels_for(Device::cuda(0)) != &cpu_kernels());
}

TEST_CASE("cuda elementwise kernels equal their CPU twins bit for bit", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::elementwise_match_cpu(gpu_side());
}

TEST_CASE("cuda add_bias equals the CPU's, sum_rows matches it to summation order", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::bias_match_cpu(gpu_side());
}

TEST_CASE("cuda sum_rows matches a double column sum within float rounding, and small integers exactly", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::sum_rows_match_oracle(gpu_side());
}

TEST_CASE("cuda sum_rows gives the same bits on every call, after other shapes and inside a CUDA graph", "[gpu]") {
  // Chapter 07 compares ZeRO stages bit for bit: the column sums' order must
  // depend on the shape alone, never on timing, scratch or stream.
  DPT_REQUIRE_GPU();
  checks::sum_rows_same_bits(gpu_side());
  Device& gpu0 = Device::cuda(0);
  for (Shape shape : {Shape{4097, 33}, Shape{40000, 10}, Shape{256, 1024}, Shape{7, 10}}) {
    const int64_t rows = shape[0], cols = shape[1];
    INFO(rows << " x " << cols);
    Tensor dy = dpt_test::twin(shape, 19).gpu, dbias = Tensor::zeros({cols}, gpu0);
    cuda_kernels(0).sum_rows(dbias.data(), dy.data(), rows, cols);
    const std::vector<float> eager = dbias.to_vector();
    // Captured on a side stream while the last eager call ran on this
    // thread's own: the capture must order itself after that call without
    // failing, and every replay must write the eager bits.
    gpu::Stream side(0);
    Tensor replayed = Tensor::zeros({cols}, gpu0);
    gpu::current_stream(0).synchronize();  // its zeros are written before the side stream's replay
    gpu::Graph graph;
    {
      gpu::StreamGuard on_side(side);
      graph.capture(side, [&] { cuda_kernels(0).sum_rows(replayed.data(), dy.data(), rows, cols); });
      graph.replay(side);
      side.synchronize();
    }
    CHECK(checks::same_bits(replayed.to_vector(), eager));
  }
}

TEST_CASE("cuda sum and sum_squares match the CPU to summation order, also over a million elements", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::sums_match_cpu(gpu_side());
}

TEST_CASE("cuda sum and sum_squares of small integers are exact, so no element is dropped or counted twice",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::integer_sums_exact(gpu_side());
}

TEST_CASE("cuda kernels over 0 elements write nothing, and their reductions give 0", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::empty_inputs(gpu_side());
}

TEST_CASE("cuda softmax-cross-entropy and its backward match the CPU's double-precision rows", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::softmax_cross_entropy_match_cpu(gpu_side());
}

TEST_CASE("cuda optimizer steps match the CPU's update rules to an ulp or two", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::optimizers_match_cpu(gpu_side());
}

TEST_CASE("cuda LARS and LAMB layer steps match the CPU's, zero norms included", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::layerwise_optimizers_match_cpu(gpu_side());
}

TEST_CASE("cuda count_correct equals the CPU's count, ties and out-of-range labels included", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::count_correct_matches_cpu(gpu_side());
}

TEST_CASE("cuda max_abs_diff equals the CPU's and reports a NaN in any block as NaN", "[gpu]") {
  DPT_REQUIRE_GPU();
  checks::max_abs_diff_matches_cpu(gpu_side());
}

TEST_CASE("cuda gemm gives the same bits wherever its operands start (views at 4 to 64 bytes in)", "[gpu]") {
  // cuBLAS chooses its kernel by alignment too; dpt stages an operand off a
  // 256-byte boundary through an aligned copy, so ch07's viewed and gathered
  // layers compute the same bits (support/gemm_offsets.h).
  DPT_REQUIRE_GPU();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose a " << ta << ", transpose b " << tb);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 33, 65, 129, 0.0f) == 0);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 256, 1024, 784, 0.5f) == 0);
      CHECK(dpt_test::gemm_offset_mismatches(Device::cuda(0), ta, tb, 4096, 10, 1024, 0.0f) == 0);
    }
}
