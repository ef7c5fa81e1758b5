// test_gpu_floats.cpp — dpt/floats.h on GPU memory against the same calls on
// host memory (pinned there by tests/core/test_floats.cpp): one IEEE
// operation per element, so equal bit for bit.
#include <cmath>
#include <vector>

#include "dpt/device.h"
#include "dpt/floats.h"
#include "dpt/gpu.h"
#include "dpt/tensor.h"
#include "support/gpu.h"

using namespace dpt;

namespace {
std::vector<float> values(int64_t n, float seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[std::size_t(i)] = std::sin(seed + 0.37f * float(i)) * 3.0f;
  return v;
}
}  // namespace

TEST_CASE("floats on cuda:0: add, scale and divide equal the host's, copies go every way", "[gpu]") {
  DPT_REQUIRE_GPU();
  const int64_t n = 70001;
  std::vector<float> a = values(n, 1), b = values(n, 2);
  Tensor da = Tensor::from_vector({n}, a, Device::cuda(0)), db = Tensor::from_vector({n}, b, Device::cuda(0));
  CHECK(gpu_of(da.data()) == 0);
  add_floats(a.data(), b.data(), n);
  add_floats(da.data(), db.data(), n);
  scale_floats(a.data(), n, 0.3f);
  scale_floats(da.data(), n, 0.3f);
  divide_floats(a.data() + 5, n - 5, 3.0f);
  divide_floats(da.data() + 5, n - 5, 3.0f);
  CHECK(da.to_vector() == a);

  Floats scratch(da.data(), n);  // next to GPU memory: on the GPU
  CHECK(scratch.gpu() == 0);
  CHECK(gpu_of(scratch.data()) == 0);
  copy_floats(scratch.data(), da.data(), n);       // GPU -> GPU
  std::vector<float> back(static_cast<std::size_t>(n));
  copy_floats(back.data(), scratch.data(), n);     // GPU -> host
  CHECK(back == a);
  copy_floats(scratch.data(), b.data(), n);        // host -> GPU
  copy_floats(back.data(), scratch.data(), n);
  CHECK(back == b);
}

TEST_CASE("add_floats of GPU memory and host memory is a sentence, not a crash", "[gpu]") {
  DPT_REQUIRE_GPU();
  std::vector<float> host(16, 1.0f);
  Tensor device = Tensor::zeros({16}, Device::cuda(0));
  CHECK_THROWS_WITH(add_floats(device.data(), host.data(), 16), contains_text("same memory"));
}
