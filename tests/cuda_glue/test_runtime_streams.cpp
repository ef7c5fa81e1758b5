// test_runtime_streams.cpp — gpu.h's copies, streams, events and graph
// capture, as common/backends/cuda/gpu_runtime.cpp and gpu_graph.cpp make
// them, run against the CUDA runtime stand-in (support/cuda_standin/). A
// test holds a stream to play a busy GPU: work queued there waits, so a
// wrapper that forgets to wait, or to order one stream after another, shows.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "support/catch.h"
#include "support/cuda_standin/standin.h"

namespace gpu = dpt::gpu;
namespace standin = dpt_test::standin;

TEST_CASE("copy to and from a GPU moves the bytes and returns only once the host may touch them",
          "[glue][copy]") {
  standin::reset();
  std::vector<float> host{1, 2, 3, 4}, back(4, 0.0f);
  void* device = gpu::allocate(0, 16);
  REQUIRE(device != nullptr);
  void* stream = gpu::current_stream(0).handle();
  standin::hold(stream);  // a busy GPU: the copy is queued behind its work
  gpu::copy(device, host.data(), 16, 0);
  INFO("copy from host memory must wait for its stream: the host may overwrite the source next");
  CHECK(standin::pending(stream) == 0);
  host.assign(4, -1.0f);
  standin::hold(stream);
  gpu::copy(back.data(), device, 16, 0);
  CHECK(back == std::vector<float>{1, 2, 3, 4});
  gpu::free(0, device);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("copy between two buffers of one GPU is queued in stream order, without waiting", "[glue][copy]") {
  standin::reset();
  auto* a = static_cast<float*>(gpu::allocate(0, 16));
  auto* b = static_cast<float*>(gpu::allocate_on_stream(0, 16));
  REQUIRE((a && b));
  std::fill(a, a + 4, 3.0f);  // the stand-in's GPU memory is host memory
  std::fill(b, b + 4, 0.0f);
  void* stream = gpu::current_stream(0).handle();
  standin::hold(stream);
  int waits = standin::counts().synchronizes;
  gpu::copy(b, a, 16, 0);
  CHECK(standin::pending(stream) == 1);
  CHECK(standin::counts().synchronizes == waits);
  CHECK(b[0] == 0.0f);
  standin::release(stream);
  CHECK(std::vector<float>(b, b + 4) == std::vector<float>(4, 3.0f));
  gpu::free(0, a);
  gpu::free_on_stream(0, b);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("copy between two GPUs starts after the source GPU's queued work and holds its later work back",
          "[glue][copy]") {
  standin::reset();
  // Pool memory (Floats' scratch): a plain copy between GPUs would need peer access.
  auto* src = static_cast<float*>(gpu::allocate_on_stream(0, 16));
  auto* dst = static_cast<float*>(gpu::allocate_on_stream(1, 16));
  REQUIRE((src && dst));
  std::fill(src, src + 4, 1.0f);
  std::fill(dst, dst + 4, 0.0f);
  void* s0 = gpu::current_stream(0).handle();
  void* s1 = gpu::current_stream(1).handle();

  standin::hold(s0);  // a kernel on GPU 0 is still writing src
  standin::enqueue(s0, [src] { std::fill(src, src + 4, 2.0f); });
  gpu::copy(dst, src, 16, 1);
  INFO("the copy must wait for the work queued on the source GPU");
  CHECK(dst[0] == 0.0f);
  standin::release(s0);
  CHECK(std::vector<float>(dst, dst + 4) == std::vector<float>(4, 2.0f));
  CHECK(gpu::current_device() == 1);

  standin::hold(s1);  // GPU 1 busy: the copy waits there
  gpu::copy(dst, src, 16, 1);
  standin::enqueue(s0, [src] { std::fill(src, src + 4, 3.0f); });  // GPU 0's next kernel overwrites src
  INFO("the source GPU's later work must wait until the copy has read src");
  CHECK(src[0] == 2.0f);
  standin::release(s1);
  CHECK(std::vector<float>(dst, dst + 4) == std::vector<float>(4, 2.0f));
  CHECK(src[0] == 3.0f);
  gpu::free_on_stream(0, src);
  gpu::free_on_stream(1, dst);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("current_stream is the thread's own per GPU, StreamGuard puts another in front, and guards nest",
          "[glue][streams]") {
  standin::reset();
  gpu::Stream& own0 = gpu::current_stream(0);
  gpu::Stream& own1 = gpu::current_stream(1);
  CHECK(&gpu::current_stream(0) == &own0);
  CHECK(&own0 != &own1);
  CHECK(own1.device() == 1);
  gpu::Stream a(0), b(0);
  {
    gpu::StreamGuard outer(a);
    CHECK(&gpu::current_stream(0) == &a);
    CHECK(&gpu::current_stream(1) == &own1);
    {
      gpu::StreamGuard inner(b);
      CHECK(&gpu::current_stream(0) == &b);
    }
    CHECK(&gpu::current_stream(0) == &a);
    // scratch goes on the guarded stream
    standin::hold(a.handle());
    void* p = gpu::allocate_on_stream(0, 8);
    gpu::free_on_stream(0, p);
    CHECK(standin::pending(a.handle()) == 1);
    CHECK(standin::pending(own0.handle()) == 0);
    gpu::synchronize(0);  // the guarded stream too
    CHECK(standin::pending(a.handle()) == 0);
  }
  CHECK(&gpu::current_stream(0) == &own0);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("a thread's own stream is another thread's than ours, and its exit finishes and destroys it",
          "[glue][streams]") {
  standin::reset();
  void* ours = gpu::current_stream(0).handle();
  auto* buffer = static_cast<float*>(gpu::allocate(0, 4));
  REQUIRE(buffer != nullptr);
  *buffer = 0.0f;
  int handles = standin::live_handles();
  void* theirs = nullptr;
  std::thread worker([&] {
    theirs = gpu::current_stream(0).handle();
    standin::hold(theirs);
    standin::enqueue(theirs, [buffer] { *buffer = 7.0f; });
  });
  worker.join();
  CHECK(theirs != ours);
  CHECK(*buffer == 7.0f);
  CHECK(standin::live_handles() == handles);
  gpu::free(0, buffer);
}

TEST_CASE("Stream::wait orders a stream after an Event recorded on another, and events time what ran between",
          "[glue][streams]") {
  standin::reset();
  gpu::set_current_device(0);
  gpu::Stream producer(0), consumer(0);
  std::vector<int> order;
  gpu::Event start, ready;
  start.record(producer);
  standin::hold(producer.handle());
  standin::enqueue(producer.handle(), [&] { order.push_back(1); });
  ready.record(producer);
  consumer.wait(ready);
  standin::enqueue(consumer.handle(), [&] { order.push_back(2); });
  CHECK(order.empty());
  standin::release(producer.handle());
  CHECK(order == std::vector<int>{1, 2});
  ready.synchronize();
  CHECK(ready.elapsed_ms_since(start) == 2.0f);  // the stand-in's clock: one per piece of work
  gpu::set_current_device(1);
  gpu::Event elsewhere;  // lives on GPU 1: CUDA records it on GPU 1's streams only
  CHECK_THROWS_WITH(elsewhere.record(producer), contains_text("invalid resource handle"));
}

TEST_CASE("allocate while this thread captures: cudaMalloc stays legal, no room is nullptr without a "
          "synchronize, and the capture survives",
          "[glue][capture]") {
  standin::reset({2, 4096});
  gpu::Stream& stream = gpu::current_stream(0);
  gpu::Graph graph;
  void* fits = nullptr;
  void* too_big = &graph;
  graph.capture(stream, [&] {
    fits = gpu::allocate(0, 1024);  // a cache miss in Device: legal in a relaxed capture
    too_big = gpu::allocate(0, 8192);  // trimming the pool would synchronize and end the capture
    standin::enqueue(stream.handle(), [] {});
  });
  CHECK(fits == standin::last_allocation());
  CHECK(too_big == nullptr);
  CHECK(graph.captured());
  CHECK(graph.node_count() == 1);
  CHECK(standin::counts().refused_in_capture == 0);
  CHECK(standin::counts().trims == 0);
  gpu::free(0, fits);
  CHECK(standin::live_allocations() == 0);
}

TEST_CASE("a captured graph runs nothing until replayed, then all it recorded each time, scratch included",
          "[glue][capture]") {
  standin::reset();
  gpu::Stream& stream = gpu::current_stream(0);
  int handles = standin::live_handles();
  {
    gpu::Graph graph;
    int runs = 0;
    float* scratch = nullptr;
    graph.capture(stream, [&] {
      scratch = static_cast<float*>(gpu::allocate_on_stream(0, 16));
      standin::enqueue(stream.handle(), [&] { scratch[0] = float(++runs); });
      gpu::free_on_stream(0, scratch);
    });
    CHECK(runs == 0);
    CHECK(graph.node_count() == 3);
    graph.replay(stream);
    graph.replay(stream);
    CHECK(runs == 2);
    CHECK(scratch[0] == 2.0f);
    CHECK_THROWS_WITH(graph.capture(stream, [] {}), contains_text("already holds a recording"));
    gpu::Stream other(1);
    CHECK_THROWS_WITH(graph.replay(other), contains_text("captured on cuda:0, the stream is on cuda:1"));
  }
  CHECK(standin::live_allocations() == 0);  // the graph's scratch went with it
  CHECK(standin::live_handles() == handles);
}

TEST_CASE("a wait or a host copy inside a capture fails it with CUDA's reason and the hint, and the stream "
          "works again",
          "[glue][capture]") {
  standin::reset();
  gpu::Stream& stream = gpu::current_stream(0);
  auto status = [&] {
    cudaStreamCaptureStatus s = cudaStreamCaptureStatusActive;
    cudaStreamIsCapturing(static_cast<cudaStream_t>(stream.handle()), &s);
    return s;
  };
  gpu::Graph waits;
  CHECK_THROWS_WITH(waits.capture(stream, [&] { stream.synchronize(); }),
                    contains_text("capturing a CUDA graph on cuda:0 failed") &&
                        contains_text("operation not permitted when stream is capturing") &&
                        contains_text("cannot be captured"));
  CHECK_FALSE(waits.captured());
  CHECK(status() == cudaStreamCaptureStatusNone);
  CHECK(cudaGetLastError() == cudaSuccess);

  float host = 0.0f;
  auto* device = static_cast<float*>(gpu::allocate(0, 4));
  gpu::Graph copies;
  CHECK_THROWS_WITH(copies.capture(stream, [&] { gpu::copy(&host, device, 4, 0); }),
                    contains_text("operation not permitted when stream is capturing"));
  CHECK(status() == cudaStreamCaptureStatusNone);
  gpu::Graph throws;
  CHECK_THROWS_WITH(throws.capture(stream, [] { throw std::runtime_error("a planted failure"); }),
                    contains_text("capturing a CUDA graph on cuda:0 failed: a planted failure"));
  CHECK(status() == cudaStreamCaptureStatusNone);

  *device = 5.0f;
  gpu::copy(&host, device, 4, 0);  // works normally again
  CHECK(host == 5.0f);
  gpu::free(0, device);
  CHECK(standin::live_allocations() == 0);
}
