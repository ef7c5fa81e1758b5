// test_runtime_memory.cpp — gpu.h's device queries, allocations and frees,
// as common/backends/cuda/gpu_runtime.cpp makes them, run against the CUDA
// runtime stand-in (support/cuda_standin/) on a machine without a GPU: the
// glue must hand back exactly what the runtime gave, say "no room" only when
// the runtime did, and give back exactly what it took. Each test starts
// from a fresh stand-in (two fake GPUs of 1 MiB unless it says otherwise).
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "support/catch.h"
#include "support/cuda_standin/standin.h"

namespace gpu = dpt::gpu;
namespace standin = dpt_test::standin;

TEST_CASE("allocate returns the very pointer cudaMalloc gave, and free gives it back", "[glue][memory]") {
  standin::reset();
  void* p = gpu::allocate(1, 4096);
  INFO("gpu::allocate must return the pointer cudaMalloc wrote, read after cudaMalloc returned");
  REQUIRE(p != nullptr);
  CHECK(p == standin::last_allocation());
  CHECK(gpu::device_of_pointer(p) == 1);
  CHECK(standin::used_bytes(1) == 4096);
  CHECK(standin::counts().mallocs == 1);
  gpu::free(1, p);
  INFO("gpu::free must give back exactly what was allocated");
  CHECK(standin::live_allocations() == 0);
  CHECK(standin::used_bytes(1) == 0);
  CHECK(standin::counts().frees == 1);
}

TEST_CASE("allocate_on_stream returns the very pointer cudaMallocAsync gave, and free_on_stream gives it back "
          "in stream order, without waiting",
          "[glue][memory]") {
  standin::reset();
  void* p = gpu::allocate_on_stream(0, 1000);
  INFO("gpu::allocate_on_stream must return the pointer cudaMallocAsync wrote, read after it returned");
  REQUIRE(p != nullptr);
  CHECK(p == standin::last_allocation());
  CHECK(gpu::device_of_pointer(p) == 0);
  void* stream = gpu::current_stream(0).handle();
  standin::hold(stream);  // a busy GPU: the free waits for the work queued before it
  gpu::free_on_stream(0, p);
  CHECK(standin::live_allocations() == 1);
  CHECK(standin::pending(stream) == 1);
  standin::release(stream);
  CHECK(standin::live_allocations() == 0);
  CHECK(standin::counts().async_frees == 1);
  // The pool keeps freed scratch for the next Floats, across a synchronize
  // too (keep_pool_memory: CUDA's default release threshold is 0).
  CHECK(standin::pool_idle_bytes(0) == 1000);
  gpu::synchronize(0);
  CHECK(standin::pool_idle_bytes(0) == 1000);

  // On a stream the caller names (scratch that outlives a StreamGuard).
  gpu::Stream side(0);
  void* q = gpu::allocate_on_stream(0, 64);
  REQUIRE(q == standin::last_allocation());
  standin::hold(side.handle());
  gpu::free_on_stream(0, q, side);
  CHECK(standin::pending(side.handle()) == 1);
  CHECK(standin::pending(stream) == 0);
  standin::release(side.handle());
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("allocate and allocate_on_stream return nullptr only when the GPU has no room, and leave no "
          "sticky error",
          "[glue][memory]") {
  standin::reset({2, 1 << 16});
  CHECK(gpu::allocate(0, (1 << 16) + 1) == nullptr);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(gpu::allocate_on_stream(0, (1 << 16) + 1) == nullptr);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(standin::live_allocations() == 0);
  // Exactly the capacity fits, in either.
  void* all = gpu::allocate(0, 1 << 16);
  REQUIRE(all != nullptr);
  CHECK(gpu::allocate_on_stream(0, 1) == nullptr);
  gpu::free(0, all);
  void* pooled = gpu::allocate_on_stream(0, 1 << 16);
  CHECK(pooled == standin::last_allocation());
  gpu::free_on_stream(0, pooled);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("allocate gives the pool's idle memory back once this thread's frees have run, and tries again",
          "[glue][memory]") {
  standin::reset({2, 4096});
  void* scratch = gpu::allocate_on_stream(0, 3072);
  REQUIRE(scratch != nullptr);
  void* stream = gpu::current_stream(0).handle();
  standin::hold(stream);
  gpu::free_on_stream(0, scratch);  // queued behind busy work: the pool gets it once the stream has run
  void* p = gpu::allocate(0, 2048);
  INFO("allocate must synchronize (the free runs), trim the pool, and return the retry's pointer");
  REQUIRE(p != nullptr);
  CHECK(p == standin::last_allocation());
  CHECK(standin::counts().out_of_memory == 1);
  CHECK(standin::counts().trims == 1);
  CHECK(standin::pool_idle_bytes(0) == 0);
  gpu::free(0, p);
  CHECK(standin::live_allocations() == 0);
  CHECK(standin::used_bytes(0) == 0);
}

TEST_CASE("an allocation that fails for another reason than room throws, naming the call and CUDA's reason",
          "[glue][memory]") {
  standin::reset();
  standin::fail_next("cudaMalloc", cudaErrorLaunchFailure);
  CHECK_THROWS_WITH(gpu::allocate(0, 64), contains_text("cudaMalloc failed: unspecified launch failure"));
  standin::fail_next("cudaMallocAsync", cudaErrorLaunchFailure);
  CHECK_THROWS_WITH(gpu::allocate_on_stream(0, 64),
                    contains_text("cudaMallocAsync failed: unspecified launch failure"));
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("free ignores a runtime that is unloading at exit and reports any other failure (nullptr: nothing)",
          "[glue][memory]") {
  standin::reset();
  void* p = gpu::allocate(0, 64);
  REQUIRE(p != nullptr);
  standin::fail_next("cudaFree", cudaErrorCudartUnloading);
  CHECK_NOTHROW(gpu::free(0, p));
  standin::fail_next("cudaFree", cudaErrorLaunchFailure);
  CHECK_THROWS_WITH(gpu::free(0, p), contains_text("unspecified launch failure"));
  gpu::free(0, p);
  CHECK(standin::live_allocations() == 0);
  gpu::free(0, nullptr);
  gpu::free_on_stream(0, nullptr);
  CHECK(standin::counts().frees == 1);
  CHECK(standin::counts().async_frees == 0);
}

TEST_CASE("device queries read the runtime: count, description, free memory, bus id, a GPU that is missing",
          "[glue][memory]") {
  standin::reset({2, std::size_t(3) << 29});
  CHECK(gpu::built_with_cuda());
  CHECK(gpu::device_count() == 2);
  CHECK(gpu::unavailable_reason().empty());
  CHECK(gpu::device_description(1) == "Stand-in GPU 1 (sm_90, 1.5 GiB)");
  CHECK(gpu::pci_bus_id(1) == "0000:02:00.0");
  void* p = gpu::allocate(0, 1000);
  std::size_t free_bytes = 0, total_bytes = 0;
  gpu::memory_info(0, free_bytes, total_bytes);
  CHECK(total_bytes == std::size_t(3) << 29);
  CHECK(free_bytes == total_bytes - 1000);
  gpu::free(0, p);
  CHECK_THROWS_WITH(gpu::allocate(2, 8), contains_text("cuda:2 does not exist: this process sees 2 GPUs"));
  gpu::set_current_device(1);
  CHECK(gpu::current_device() == 1);

  standin::reset({0, 1 << 20});
  CHECK(gpu::device_count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);  // "no device" is cleared for later calls
  CHECK_THAT(gpu::unavailable_reason(), contains_text("no CUDA device: no CUDA-capable device is detected"));
  CHECK(gpu::current_device() == -1);
  CHECK_THROWS_WITH(gpu::allocate(0, 8),
                    contains_text("cuda:0 does not exist: this process sees 0 GPUs (no CUDA device"));
  standin::reset();
}

TEST_CASE("device_of_pointer knows the runtime's allocations and their GPU, and host memory is -1",
          "[glue][memory]") {
  standin::reset();
  auto* p = static_cast<unsigned char*>(gpu::allocate(1, 256));
  REQUIRE(p != nullptr);
  CHECK(gpu::device_of_pointer(p) == 1);
  CHECK(gpu::device_of_pointer(p + 255) == 1);
  CHECK(gpu::is_device_pointer(p + 10));
  std::vector<unsigned char> host(16);
  CHECK(gpu::device_of_pointer(host.data()) == -1);
  CHECK_FALSE(gpu::is_device_pointer(host.data()));
  CHECK(gpu::device_of_pointer(nullptr) == -1);
  gpu::free(1, p);
  CHECK(standin::live_allocations() == 0);
}
