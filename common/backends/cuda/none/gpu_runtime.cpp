// none/gpu_runtime.cpp — gpu.h when CMake found no CUDA toolkit: no GPUs, and
// every call that needs one says how to get it. (With CUDA,
// backends/cuda/gpu_runtime.cpp is built instead; no #if anywhere else.)
#include "dpt/gpu.h"

#include "dpt/check.h"

namespace dpt::gpu {

namespace {
constexpr const char* kNoCuda =
    "dpt was built without CUDA (CMake found no CUDA toolkit). On a machine with "
    "an NVIDIA GPU, install the CUDA toolkit (nvcc on PATH) and reconfigure: "
    "cmake --preset reference";
[[noreturn]] void no_cuda(const char* what) { DPT_FAIL(what << ": " << kNoCuda); }
}  // namespace

bool built_with_cuda() { return false; }
bool built_with_nccl() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kNoCuda; }
std::string device_description(int) { no_cuda("describing a GPU"); }
void memory_info(int, std::size_t&, std::size_t&) { no_cuda("GPU memory info"); }

Stream::Stream(int device) : device_(device) { no_cuda("a CUDA stream"); }
Stream::~Stream() = default;
void Stream::synchronize() const {}
void Stream::wait(const Event&) const {}
Event::Event() { no_cuda("a CUDA event"); }
Event::~Event() = default;
void Event::record(const Stream&) {}
void Event::synchronize() const {}
float Event::elapsed_ms_since(const Event&) const { return 0.0f; }
void set_current_device(int) { no_cuda("choosing a GPU"); }
int current_device() { return -1; }
Stream& current_stream(int) { no_cuda("a CUDA stream"); }
StreamGuard::StreamGuard(Stream& stream) : device_(stream.device()), previous_(nullptr) {}
StreamGuard::~StreamGuard() = default;

Graph::~Graph() = default;
void Graph::capture(Stream&, const std::function<void()>&) { no_cuda("a CUDA graph"); }
void Graph::replay(const Stream&) const { no_cuda("a CUDA graph"); }
std::size_t Graph::node_count() const { return 0; }

void* allocate(int, std::size_t) { no_cuda("GPU memory"); }
void free(int, void*) {}
void* allocate_on_stream(int, std::size_t) { no_cuda("GPU memory"); }
void free_on_stream(int, void*) {}
void free_on_stream(int, void*, const Stream&) {}
void copy(void*, const void*, std::size_t, int) { no_cuda("a GPU copy"); }
void synchronize(int) {}

int device_of_pointer(const void*) { return -1; }
bool is_device_pointer(const void*) { return false; }
std::string pci_bus_id(int) { no_cuda("a GPU's PCI bus id"); }

}  // namespace dpt::gpu
