// test_gpu_graph.cpp — gpu::Graph: capturing records work without running it,
// a replay runs the recording and reads its buffers at replay time, and a
// capture that would wait for the GPU fails with a sentence and leaves the
// stream usable. Oracle: host vectors written here; the recorded work is a
// device-to-device copy, so these tests do not depend on the CUDA kernels.
// The last test captures a kernel that takes host labels: its oracle is the
// same kernel run eagerly with each set of labels.
#include <cstdint>
#include <vector>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
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

TEST_CASE("a captured loss reads its capture's labels, and eager calls with other labels run before and after it", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  Kernels& kernels = kernels_for(gpu0);
  const int64_t rows = 4, classes = 3;
  Tensor logits = Tensor::from_vector({rows, classes}, ramp(12, -1.0f), gpu0);
  Tensor probs = Tensor::zeros({rows, classes}, gpu0), loss = Tensor::zeros({1}, gpu0);
  const std::vector<int64_t> a = {0, 1, 2, 0}, b = {2, 2, 1, 1};
  auto loss_with = [&](const std::vector<int64_t>& labels) {
    kernels.softmax_cross_entropy(probs.data(), loss.data(), logits.data(), labels.data(), rows, classes);
    return loss.item();
  };
  const float loss_a = loss_with(a), loss_b = loss_with(b);  // eager: the oracle
  REQUIRE(loss_a != loss_b);
  gpu::Stream& stream = gpu::current_stream(0);
  gpu::Graph graph;
  graph.capture(stream, [&] {
    kernels.softmax_cross_entropy(probs.data(), loss.data(), logits.data(), a.data(), rows, classes);
  });
  // Eager, other labels, after the capture: nothing it recorded (events, the
  // pinned label buffer) stands in the way.
  REQUIRE(loss_with(b) == loss_b);
  graph.replay(stream);
  REQUIRE(loss.item() == loss_a);  // the capture's labels, not the last eager call's
  REQUIRE(loss_with(b) == loss_b);
  graph.replay(stream);
  REQUIRE(loss.item() == loss_a);
}
