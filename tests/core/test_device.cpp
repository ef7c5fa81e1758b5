// test_device.cpp — per-device memory accounting and the capacity limit.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/catch.h"
#include "support/child_says.h"
#include "support/run_program.h"

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/tensor.h"

using namespace dpt;

TEST_CASE("devices count current and peak bytes per device", "[device]") {
  Device& dev = Device::cpu(40);
  std::size_t base = dev.current_bytes();
  {
    Tensor a = Tensor::zeros({256}, dev);  // 1 KiB
    Tensor view = a.rows(0, 10);          // a view allocates nothing
    CHECK(dev.current_bytes() == base + 1024);
    dev.reset_peak();
    { Tensor b = Tensor::zeros({512}, dev); }
    CHECK(dev.peak_bytes() == base + 1024 + 2048);
  }
  CHECK(dev.current_bytes() == base);
  CHECK(Device::cpu(39).current_bytes() == 0);  // another device saw nothing
}

TEST_CASE("a capped device refuses an allocation with a clear out-of-memory error", "[device]") {
  Device& dev = Device::cpu(42);
  dev.set_capacity(dev.current_bytes() + 4096);
  Tensor fits = Tensor::zeros({1024}, dev);
  CHECK_THROWS_AS(Tensor::zeros({1}, dev), OutOfMemory);
  CHECK_THROWS_WITH(Tensor::zeros({1}, dev),
                    contains_text("out of memory on cpu:42") && contains_text("4 B") && contains_text("capacity"));
  std::size_t used = dev.current_bytes();
  CHECK(used == dev.capacity());  // the refused allocation was not counted
  dev.set_capacity(0);
}

TEST_CASE("device names parse and bad ones are refused", "[device]") {
  CHECK(Device::get("cpu:3").name() == "cpu:3");
  CHECK(&Device::get("cpu:3") == &Device::cpu(3));
  CHECK(&Device::get("host") == &Device::host());
  CHECK_THROWS_WITH(Device::get("tpu:0"), contains_text("unknown device kind"));
  CHECK_THROWS_WITH(Device::get("cpu"), contains_text("expected host, cpu:K, cuda:K or cuda:K/A"));
  for (const char* bad : {"cpu:", "cpu:x", "cpu:3x", "cpu:-1", "cuda:0/", "cuda:0/x", "cuda:/1", "cuda:0/-2", "cuda:0/1/2"})
    CHECK_THROWS_WITH(Device::get(bad), contains_text(std::string("device '") + bad + "' has no valid index"));
  CHECK_THROWS_WITH(Device::get("cpu:1/2"), contains_text("only a GPU has accounts"));
}

TEST_CASE("a GPU's memory accounts: named cuda:K/A (account 0 plain cuda:K), refused by name without a GPU",
          "[device]") {
  // Constructed directly: a Device that never allocates needs no GPU.
  CHECK(Device(DeviceKind::Cuda, 1, 0).name() == "cuda:1");
  CHECK(Device(DeviceKind::Cuda, 1, 3).name() == "cuda:1/3");
  CHECK(Device(DeviceKind::Cuda, 1, 3).index() == 1);  // the GPU: what the kernels and gpu_of go by
  CHECK(Device(DeviceKind::Cuda, 1, 3).account() == 3);
  CHECK(Device::cpu(5).account() == 0);
  std::string reason = gpu::unavailable_reason();
  if (!reason.empty()) {  // get() parsed GPU and account: the sentence names both, as name() would
    CHECK_THROWS_WITH(Device::get("cuda:0/2"), contains_text("cuda:0/2 is not available: " + reason));
    CHECK_THROWS_WITH(Device::get("cuda:0/02"), contains_text("cuda:0/2 is not available"));
    CHECK_THROWS_WITH(Device::get("cuda:1"), contains_text("cuda:1 is not available"));
    CHECK_THROWS_WITH(Device::cuda(0, 4), contains_text("cuda:0/4 is not available"));
  }
  CHECK_THROWS_WITH(Device::cuda(0, -1), contains_text("account must be >= 0"));
  CHECK_THROWS_WITH(Device::cuda(-1, 0), contains_text("index must be >= 0"));
}

TEST_CASE("tensor views share storage and copies do not", "[tensor]") {
  Tensor t = Tensor::from_vector({3, 2}, {1, 2, 3, 4, 5, 6}, Device::host());
  Tensor row = t.rows(1, 2);
  row.data()[0] = 30;
  CHECK(t.data()[2] == 30);
  Tensor copy = t.clone();
  copy.data()[0] = 100;
  CHECK(t.data()[0] == 1);
  CHECK(t.reshape({6}).slice(4, 2).to_vector() == std::vector<float>{5, 6});
  CHECK_THROWS_WITH(t.reshape({4}), contains_text("sizes differ"));
  CHECK_THROWS_WITH(t.rows(2, 4), contains_text("out of range"));
}

TEST_CASE("freed blocks are reused by the next allocation of the same size and not counted", "[device]") {
  Device& dev = Device::cpu(43);
  dev.empty_cache();
  const float* first = nullptr;
  {
    Tensor a = Tensor::zeros({1000}, dev);
    first = a.data();
  }
  CHECK(dev.current_bytes() == 0);
  CHECK(dev.cached_bytes() == 4032);  // 4000 rounded up to 64 bytes
  Tensor b = Tensor::zeros({1000}, dev);
  CHECK(b.data() == first);
  CHECK(dev.cached_bytes() == 0);
  dev.empty_cache();
}

// Runs in a child process started by the next test, with
// DPT_NO_MEMORY_CACHING=1 set before the process started (hidden by [.]; inert
// unless DPT_TEST_CHILD says so).
TEST_CASE("child: with caching off a freed block goes straight back", "[.]") {
  const char* child = std::getenv("DPT_TEST_CHILD");
  if (!child || std::string(child) != "no-caching") return;
  REQUIRE_FALSE(Device::memory_caching());
  Device& d = Device::cpu(7);
  { Tensor t = Tensor::zeros({1000}, d); }
  CHECK(d.cached_bytes() == 0);
  CHECK(d.current_bytes() == 0);
  std::printf("child ran: caching off\n");
}

TEST_CASE("devices keep freed blocks for reuse unless the process starts with DPT_NO_MEMORY_CACHING=1",
          "[device]") {
  if (!Device::memory_caching()) DPT_SKIP("DPT_NO_MEMORY_CACHING=1 is set in this environment");
  Device& d = Device::cpu(6);
  d.empty_cache();
  { Tensor t = Tensor::zeros({1000}, d); }
  CHECK(d.cached_bytes() == 4032);  // 4000 bytes rounded up to 64
  { Tensor again = Tensor::zeros({1000}, d); }  // reuses that block
  CHECK(d.cached_bytes() == 4032);

  char self[4096] = {};
  REQUIRE(readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  dpt_test::ProgramResult r = dpt_test::run_command(
      std::string("DPT_NO_MEMORY_CACHING=1 DPT_TEST_CHILD=no-caching '") + self +
      "' 'child: with caching off a freed block goes straight back' " + dpt_test::kCatchNoColour);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("child ran: caching off") != std::string::npos);  // it ran, not "no test matched"
}
