// test_gpu_device.cpp — cuda:k devices: memory accounting, copies, streams,
// and the per-rank memory accounts of a shared GPU (cuda:K/A).
// Oracle: host memory (a round trip must give back the bytes sent), the
// simulated devices' accounting, which the core tests pin, and tensor sizes
// written out here.
#include <vector>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/launch.h"
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
  Tensor c = Tensor::zeros({1 << 20}, gpu0);  // its zeros queued before the event, too
  gpu::Stream side(0);
  gpu::Event written;
  b.copy_from(a);  // queued on this thread's stream
  written.record(gpu::current_stream(0));
  side.wait(written);
  {
    gpu::StreamGuard on_side(side);
    c.copy_from(b);  // must see b after the copy above
  }
  side.synchronize();
  REQUIRE(c.to_vector() == values);
}

// ----------------------------------------------------------------------------
// memory accounts: rank threads sharing a GPU, each counted on its own

TEST_CASE("two accounts on cuda:0 are two devices: names round-trip, bytes and capacities apart", "[gpu]") {
  DPT_REQUIRE_GPU();
  Device& first = Device::cuda(0, 1);
  Device& second = Device::cuda(0, 2);
  REQUIRE(&first != &second);
  REQUIRE(&first != &Device::cuda(0));
  REQUIRE(&Device::cuda(0, 1) == &first);  // one device per (GPU, account), for the whole program
  CHECK(first.name() == "cuda:0/1");
  CHECK(&Device::get(first.name()) == &first);  // get() parses what name() prints
  CHECK(&Device::get("cuda:0") == &Device::cuda(0, 0));
  CHECK(first.index() == 0);
  CHECK(second.account() == 2);
  const std::size_t mib = std::size_t(1) << 20;
  std::size_t first_before = first.current_bytes(), second_before = second.current_bytes();
  std::size_t shared_before = Device::cuda(0).current_bytes();
  {
    Tensor a = Tensor::zeros({1024, 1024}, first);  // 4 MiB on account 1
    Tensor b = Tensor::zeros({512, 1024}, second);  // 2 MiB on account 2
    CHECK(first.current_bytes() == first_before + 4 * mib);
    CHECK(second.current_bytes() == second_before + 2 * mib);
    CHECK(Device::cuda(0).current_bytes() == shared_before);  // account 0 saw neither
    // Each refuses past its own capacity, whatever the other holds.
    first.set_capacity(first.current_bytes() + 3 * mib);
    second.set_capacity(second.current_bytes() + 5 * mib);
    CHECK_THROWS_WITH(Tensor::zeros({1024, 1024}, first),
                      contains_text("out of memory on cuda:0/1") && contains_text("asked for 4.00 MiB"));
    Tensor fits = Tensor::zeros({1024, 1024}, second);  // 4 MiB: within account 2's 5 MiB
    CHECK(second.current_bytes() == second_before + 6 * mib);
    CHECK(first.current_bytes() == first_before + 4 * mib);  // the refused allocation was not counted
    // Kernels run on the GPU whatever the account: a copy between accounts is exact.
    Tensor c = Tensor::full({16}, 1.5f, first);
    Tensor d = c.to(second);
    CHECK(d.to_vector() == std::vector<float>(16, 1.5f));
    first.set_capacity(0);
    second.set_capacity(0);
  }
  CHECK(first.current_bytes() == first_before);
  CHECK(second.current_bytes() == second_before);
}

TEST_CASE("under --device cuda, rank threads sharing a GPU get an account each, one per process otherwise",
          "[gpu]") {
  DPT_REQUIRE_GPU();
  const int gpus = gpu::device_count();
  for (int ranks : {gpus, gpus + 2}) {
    LaunchOptions o;
    o.ranks = ranks;
    o.device = "cuda";
    std::vector<Device*> devices(std::size_t(ranks), nullptr);
    launch(o, [&](Context& ctx) { devices[std::size_t(ctx.rank)] = &ctx.device; });
    bool shared = ranks > gpus;
    for (int r = 0; r < ranks; ++r) {
      INFO(ranks << " rank threads on " << gpus << " GPUs, rank " << r);
      CHECK(devices[std::size_t(r)]->index() == r % gpus);
      CHECK(devices[std::size_t(r)]->account() == (shared ? r : 0));
      CHECK(devices[std::size_t(r)]->name() ==
            "cuda:" + std::to_string(r % gpus) + (shared && r > 0 ? "/" + std::to_string(r) : ""));
    }
  }
}
