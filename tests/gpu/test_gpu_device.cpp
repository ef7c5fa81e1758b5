// test_gpu_device.cpp — cuda:k devices: memory accounting, copies, streams.
// Oracle: host memory (a round trip must give back the bytes sent) and the
// simulated devices' accounting, which the core tests pin.
#include <vector>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/tensor.h"
#include "support/gpu.h"

using namespace dpt;

TEST_CASE("without a usable GPU, cuda:0 is refused with the reason", "[gpu]") {
  std::string reason = gpu::unavailable_reason();
  if (reason.empty()) DPT_SKIP("this machine has a GPU: the refusal cannot be seen here");
  REQUIRE(gpu::device_count() == 0);
  REQUIRE_THROWS_WITH(Device::get("cuda:0"), contains_text("cuda:0 is not available") &&
                                                  contains_text(reason));
}

TEST_CASE("a tensor round-trips host -> cuda:0 -> host bit for bit", "[gpu]") {
  DPT_REQUIRE_GPU();
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.37f - 11.0f;
  Tensor host = Tensor::from_vector({10, 100}, values, Device::host());
  Tensor on_gpu = host.to(Device::cuda(0));
  REQUIRE(on_gpu.device().name() == "cuda:0");
  REQUIRE_FALSE(on_gpu.device().is_host_memory());
  Tensor copy = on_gpu.clone();  // device to device
  REQUIRE(copy.to_vector() == values);
  REQUIRE(on_gpu.rows(3, 4).to_vector() == std::vector<float>(values.begin() + 300, values.begin() + 400));
}

TEST_CASE("cuda:0 counts its bytes and refuses past its capacity", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  std::size_t before = gpu0.current_bytes();
  {
    Tensor t = Tensor::zeros({1024, 1024}, gpu0);  // 4 MiB
    REQUIRE(gpu0.current_bytes() == before + (std::size_t(4) << 20));
    gpu0.set_capacity(before + (std::size_t(6) << 20));
    REQUIRE_THROWS_AS(Tensor::zeros({1024, 1024}, gpu0), OutOfMemory);
    REQUIRE_THROWS_WITH(Tensor::zeros({1024, 1024}, gpu0),
                        contains_text("out of memory on cuda:0") && contains_text("asked for 4.00 MiB"));
    gpu0.set_capacity(0);
  }
  REQUIRE(gpu0.current_bytes() == before);
}

TEST_CASE("an event orders a second stream after the first", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& gpu0 = Device::cuda(0);
  std::vector<float> values(1 << 20, 2.5f);
  Tensor a = Tensor::from_vector({1 << 20}, values, gpu0);
  Tensor b = Tensor::zeros({1 << 20}, gpu0);
  gpu::Stream side(0);
  gpu::Event written;
  b.copy_from(a);  // queued on this thread's stream
  written.record(gpu::current_stream(0));
  side.wait(written);
  Tensor c = Tensor::zeros({1 << 20}, gpu0);
  {
    gpu::StreamGuard on_side(side);
    c.copy_from(b);  // must see b after the copy above
  }
  side.synchronize();
  REQUIRE(c.to_vector() == values);
}
