// test_gpu_graph.cpp — gpu::Graph: capturing records work without running it,
// a replay runs the recording and reads its buffers at replay time, and a
// capture that would wait for the GPU fails with a sentence and leaves the
// stream usable. Oracle: host vectors written here; the recorded work is a
// device-to-device copy, so these tests do not depend on the CUDA kernels.
#include <vector>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/tensor.h"
#include "support/gpu.h"

using namespace dpt;

namespace {
std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = start + 0.5f * float(i);
  return values;
}
}  // namespace

TEST_CASE("a captured copy runs only when replayed, and reads its source at replay time", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  const std::vector<float> zeros(256, 0.0f), first = ramp(256, 1.0f), second = ramp(256, -7.0f);
  Tensor src = Tensor::from_vector({256}, first, gpu0);
  Tensor dst = Tensor::from_vector({256}, zeros, gpu0);
  gpu::Stream& stream = gpu::current_stream(0);

  gpu::Graph graph;
  REQUIRE_FALSE(graph.captured());
  graph.capture(stream, [&] { gpu::copy(dst.data(), src.data(), src.nbytes(), 0); });
  REQUIRE(graph.captured());
  REQUIRE(graph.node_count() == 1);
  REQUIRE(dst.to_vector() == zeros);  // recorded, not run

  graph.replay(stream);
  REQUIRE(dst.to_vector() == first);
  // New values at the same address: the next replay copies them, not the old ones.
  src.copy_from(Tensor::from_vector({256}, second, Device::host()));
  graph.replay(stream);
  REQUIRE(dst.to_vector() == second);

  REQUIRE_THROWS_WITH(graph.capture(stream, [] {}), contains_text("already holds a recording"));
}

TEST_CASE("a capture that waits for the GPU fails with a sentence and leaves the stream usable", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  const std::vector<float> host = ramp(64, 3.0f);
  Tensor dev = Tensor::from_vector({64}, std::vector<float>(64, 0.0f), gpu0);
  gpu::Stream& stream = gpu::current_stream(0);

  gpu::Graph graph;
  // A copy from host memory waits for the GPU (gpu.h: complete on return).
  REQUIRE_THROWS_WITH(graph.capture(stream, [&] { gpu::copy(dev.data(), host.data(), 64 * sizeof(float), 0); }),
                      contains_text("capturing a CUDA graph on cuda:0 failed"));
  REQUIRE_FALSE(graph.captured());
  REQUIRE_THROWS_WITH(graph.replay(stream), contains_text("nothing captured yet"));

  gpu::copy(dev.data(), host.data(), 64 * sizeof(float), 0);  // runs now, as before the capture
  REQUIRE(dev.to_vector() == host);
}
