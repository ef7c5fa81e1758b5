// gpu_graph.cpp — gpu.h's Graph on the CUDA runtime: record a stream's work
// once, replay it with one launch. Built only when CMake found the CUDA
// toolkit (backends/cuda/none/ stands in otherwise).
#include <cuda_runtime.h>

#include <exception>
#include <functional>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "library_check.h"

namespace dpt::gpu {

namespace {
cudaStream_t as_stream(void* handle) { return static_cast<cudaStream_t>(handle); }
}  // namespace

namespace {
// Takes `stream` out of capture mode whatever state the capture is in. On
// success `graph` is the recording; on failure it is thrown away and nullptr.
// Returns the capture's status.
cudaError_t end_capture(cudaStream_t stream, cudaGraph_t& graph) {
  graph = nullptr;
  cudaError_t status = cudaStreamEndCapture(stream, &graph);
  if (status != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    graph = nullptr;
    cudaGetLastError();  // a failed capture is not sticky: clear it for later calls
  }
  return status;
}
// Ends a capture that is being abandoned (its recording callback threw):
// whatever it recorded, a valid graph included, is thrown away.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  end_capture(stream, graph);
  if (graph) cudaGraphDestroy(graph);
}
constexpr const char* kCaptureHint =
    " (while capturing, work is recorded, not run: a call that waits for the GPU, such as a "
    "copy to or from pageable host memory or a synchronize, cannot be captured)";
}  // namespace

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void Graph::capture(Stream& stream, const std::function<void()>& record) {
  DPT_CHECK(!graph_, "Graph::capture: this graph already holds a recording; capture into a new Graph");
  DPT_CUDA_CHECK(cudaSetDevice(stream.device()));
  cudaStream_t s = as_stream(stream.handle());
  // Relaxed: a cudaMalloc on this thread (a cache miss in Device, cuBLAS's
  // workspace) stays legal while capturing; it is not part of the recording.
  DPT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  try {
    record();
  } catch (const std::exception& e) {
    abandon_capture(s);
    DPT_FAIL("capturing a CUDA graph on cuda:" << stream.device() << " failed: " << e.what() << kCaptureHint);
  } catch (...) {
    abandon_capture(s);
    throw;
  }
  cudaError_t status = end_capture(s, graph);
  DPT_CHECK(status == cudaSuccess, "capturing a CUDA graph on cuda:" << stream.device() << " failed: "
                                       << cudaGetErrorString(status) << kCaptureHint);
  DPT_CHECK(graph, "capturing a CUDA graph on cuda:" << stream.device() << " recorded nothing");
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {  // the Graph stays empty, so a later capture may try again
    cudaGraphDestroy(graph);
    cudaGetLastError();  // not sticky: the next kernel launch's check must not report it
    DPT_FAIL("instantiating the CUDA graph captured on cuda:" << stream.device() << " failed: "
                                                                << cudaGetErrorString(made));
  }
  graph_ = graph;
  exec_ = exec;
  device_ = stream.device();
}

void Graph::replay(const Stream& stream) const {
  DPT_CHECK(exec_, "Graph::replay: nothing captured yet (call capture() first)");
  DPT_CHECK(stream.device() == device_, "Graph::replay: the graph was captured on cuda:"
                                            << device_ << ", the stream is on cuda:" << stream.device());
  DPT_CUDA_CHECK(cudaSetDevice(device_));
  DPT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream.handle())));
}

std::size_t Graph::node_count() const {
  if (!graph_) return 0;
  std::size_t count = 0;
  DPT_CUDA_CHECK(cudaGraphGetNodes(static_cast<cudaGraph_t>(graph_), nullptr, &count));
  return count;
}

}  // namespace dpt::gpu
