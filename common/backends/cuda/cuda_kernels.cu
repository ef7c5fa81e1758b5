// cuda_kernels.cu — kernels.h on a GPU: cuBLAS SGEMM for gemm (strided-
// batched for gemm_batched), and for the rest the kernels of
// cuda_elementwise.cuh, cuda_reductions.cuh and cuda_transformer.cuh, launched
// as cuda_launches.cuh plans them (the tests run those same plans on the CPU
// emulator). One CudaKernels per GPU; everything is queued on the calling
// thread's current stream for that GPU (gpu.h) and returns at once, except
// count_correct and max_abs_diff, whose answer the host waits for. The 16-bit
// ops are gpu_half.h's (cuda_half.cu), behind the same seam.
//
// Per (thread, GPU) state (a cuBLAS handle, the label buffer, the reductions'
// partials) is cuda_thread_state.cuh's.
//
// Left out: fusion beyond the Adam step, vectorised loads, TF32 by default.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_launches.cuh"
#include "cuda_stream_launch.cuh"
#include "cuda_thread_state.cuh"
#include "dpt/check.h"
#include "dpt/floats.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/kernel_math.h"
#include "dpt/kernels.h"
#include "library_check.h"

namespace dpt {

// ----------------------------------------------------------------------------
// the Kernels

namespace {
using namespace cuda;

constexpr std::size_t kPartialsBytes = (kMaxPartials + 1) * 8;  // kMaxPartials 8-byte partials, then the result
constexpr std::uintptr_t kGemmAlignment = 256;  // bytes: cuBLAS's default assumption

// An operand of a GEMM as cuBLAS will see it: `data` itself when it starts on
// a 256-byte boundary, else an aligned copy in stream-ordered scratch (copied
// in when `read`; an output copies back with write_back). Queued on `stream`:
// capture-safe (no host wait), freed in the stream's order.
struct Aligned {
  float* ptr;                 // what cuBLAS gets
  void* scratch = nullptr;    // the copy's memory, when one was needed
  int device;
  Aligned(const float* data, int64_t count, bool read, cudaStream_t stream, int gpu) : device(gpu) {
    ptr = const_cast<float*>(data);
    if (reinterpret_cast<std::uintptr_t>(data) % kGemmAlignment == 0) return;
    scratch = gpu::allocate_on_stream(gpu, std::size_t(count) * sizeof(float) + kGemmAlignment);
    DPT_CHECK(scratch, "gemm on cuda:" << gpu << ": no room for an aligned copy of " << count << " floats");
    auto at = (reinterpret_cast<std::uintptr_t>(scratch) + kGemmAlignment - 1) / kGemmAlignment * kGemmAlignment;
    ptr = reinterpret_cast<float*>(at);
    if (!read) return;
    cudaError_t status = cudaMemcpyAsync(ptr, data, std::size_t(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    if (status != cudaSuccess) {
      free_scratch();  // no destructor runs for a constructor that throws
      DPT_CUDA_CHECK(status);
    }
  }
  void write_back(float* data, int64_t count, cudaStream_t stream) const {
    if (scratch) DPT_CUDA_CHECK(cudaMemcpyAsync(data, ptr, std::size_t(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
  ~Aligned() { free_scratch(); }
  void free_scratch() noexcept {
    try {
      if (scratch) gpu::free_on_stream(device, scratch);
    } catch (...) {  // a GPU already in error: its memory goes with the context (unwinding must go on)
    }
    scratch = nullptr;
  }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

// The Kernels calls of LaunchedKernels (cuda_launches.cuh) queued on the
// calling thread's stream, and gemm through cuBLAS.
class CudaKernels final : public LaunchedKernels<CudaKernels> {
 public:
  explicit CudaKernels(int device) : device_(device) {}

  // ---- BLAS ----

  // Row-major c (m, n) is column-major cᵀ (n, m), and cᵀ = op(b)ᵀ · op(a)ᵀ:
  // so cuBLAS gets b first, each with its own transpose flag and its stored
  // row length as leading dimension.
  void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // cuBLAS wants leading dimensions ≥ 1; c = beta · c by hand
      if (beta == 0.0f) fill(c, 0.0f, m * n);
      else if (beta != 1.0f) scale(c, beta, m * n);
      return;
    }
    DPT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
              "gemm on cuda:" << device_ << ": sizes (" << m << ", " << n << ", " << k << ") exceed cuBLAS's int");
    cudaStream_t stream = current();
    // cuBLAS picks its kernel from the shapes AND from how the operands are
    // aligned (up to 256 bytes, what it assumes by default), and two kernels
    // may sum k in another order. A view at an odd offset (ch07's layers in
    // one flat buffer) would then get other bits than the same numbers in a
    // fresh block (ch07's gathered layer). So an operand off a 256-byte
    // boundary is computed through an aligned copy: one answer per shape,
    // wherever a tensor starts. Fresh tensors (cudaMalloc'd) never need it.
    Aligned a_at(a, m * k, true, stream, device_);
    Aligned b_at(b, k * n, true, stream, device_);
    Aligned c_at(c, m * n, beta != 0.0f, stream, device_);
    cublasHandle_t blas = blas_handle();
    DPT_CUBLAS_CHECK(cublasSetStream(blas, stream));
    DPT_CUBLAS_CHECK(cublasSetMathMode(blas, tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    DPT_CUBLAS_CHECK(cublasSgemm(blas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 int(n), int(m), int(k), &alpha, b_at.ptr, int(transpose_b ? k : n), a_at.ptr,
                                 int(transpose_a ? m : k), &beta, c_at.ptr, int(n)));
    c_at.write_back(c, m * n, stream);
  }

  // gemm's mapping for each of `batch` products, one cuBLAS call. Each operand
  // (its whole strided extent) goes through an aligned copy when it starts off
  // a 256-byte boundary, as in gemm: the bits then depend on the shapes and
  // strides alone, not on where the tensors start.
  void gemm_batched(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c, int64_t stride_c,
                    int64_t batch) override {
    if (batch == 0 || m == 0 || n == 0) return;
    DPT_CHECK(stride_a >= 0 && stride_b >= 0 && (batch == 1 || stride_c >= m * n),
              "gemm_batched on cuda:" << device_ << ": strides (" << stride_a << ", " << stride_b << ", " << stride_c
                                      << ") must be ≥ 0, and c's ≥ m·n = " << m * n << " (its products must not overlap)");
    if (k == 0) {  // c_i = beta · c_i by hand, as gemm
      for (int64_t i = 0; i < batch; ++i) gemm(false, false, m, n, 0, alpha, a, b, beta, c + i * stride_c);
      return;
    }
    DPT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && batch <= INT_MAX,
              "gemm_batched on cuda:" << device_ << ": sizes (" << m << ", " << n << ", " << k << ") or batch "
                                      << batch << " exceed cuBLAS's int");
    cudaStream_t stream = current();
    Aligned a_at(a, (batch - 1) * stride_a + m * k, true, stream, device_);
    Aligned b_at(b, (batch - 1) * stride_b + k * n, true, stream, device_);
    // c's copy is read in when beta needs it, and when gaps between its
    // products would otherwise go back as whatever the scratch held
    const bool gaps = batch > 1 && stride_c > m * n;
    Aligned c_at(c, (batch - 1) * stride_c + m * n, beta != 0.0f || gaps, stream, device_);
    cublasHandle_t blas = blas_handle();
    DPT_CUBLAS_CHECK(cublasSetStream(blas, stream));
    DPT_CUBLAS_CHECK(cublasSetMathMode(blas, tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    DPT_CUBLAS_CHECK(cublasSgemmStridedBatched(
        blas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k),
        &alpha, b_at.ptr, int(transpose_b ? k : n), stride_b, a_at.ptr, int(transpose_a ? m : k), stride_a, &beta,
        c_at.ptr, int(n), stride_c, int(batch)));
    c_at.write_back(c, (batch - 1) * stride_c + m * n, stream);
  }

  // ---- 16-bit formats: gpu_half.h's kernels (cuda_half.cu) ----

  void round_half(float* x, int64_t n, Half format, math::RoundingCounts* counts) override {
    gpu::round_floats(x, n, format, device_, counts);
  }
  // The operands as 16-bit patterns in stream-ordered scratch (two a float),
  // then one tensor-core GEMM summing in fp32.
  void gemm_half(Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c) override {
    Floats a_scratch(device_, (m * k + 1) / 2), b_scratch(device_, (k * n + 1) / 2);
    uint16_t* a16 = reinterpret_cast<uint16_t*>(a_scratch.data());
    uint16_t* b16 = reinterpret_cast<uint16_t*>(b_scratch.data());
    gpu::round_to_half(a16, a, m * k, format, device_);
    gpu::round_to_half(b16, b, k * n, format, device_);
    gpu::gemm_half(device_, format, transpose_a, transpose_b, m, n, k, 1.0f, a16, b16, 0.0f, c);
  }
  int64_t count_inf_or_nan(const float* x, int64_t n) override { return gpu::count_inf_or_nan(x, n, device_); }

 private:
  friend class LaunchedKernels<CudaKernels>;  // the hooks below

  // The calling thread's current stream on this GPU, with this GPU made current.
  cudaStream_t current() {
    DPT_CUDA_CHECK(cudaSetDevice(device_));
    return static_cast<cudaStream_t>(gpu::current_stream(device_).handle());
  }

  // ---- LaunchedKernels' hooks ----
  StreamLaunch launcher() { return StreamLaunch{current()}; }
  template <typename T>
  void read_back(T* host, const T* result) {
    gpu::copy(host, result, sizeof(T), device_);  // waits for the kernels
  }
  std::string where() const { return "cuda:" + std::to_string(device_); }

  // This thread's state on this GPU, with its earlier uses from another
  // stream (a StreamGuard switched it) ordered before what comes next.
  // last_use is only ever recorded outside captures (release), and a stream
  // being captured may wait on such an event only as an external event:
  // without cudaEventWaitExternal the capture fails (cudaErrorStreamCaptureIsolation).
  // With it the wait becomes a node of the graph: each replay waits for the
  // work last_use marks when the replay runs.
  ThreadState& acquire() {
    ThreadState& state = thread_state(device_, kPartialsBytes);
    cudaStream_t stream = current();
    if (state.last_stream && state.last_stream != stream) {
      unsigned int flags = capturing(stream) ? cudaEventWaitExternal : cudaEventWaitDefault;
      DPT_CUDA_CHECK(cudaStreamWaitEvent(stream, state.last_use, flags));
    }
    return state;
  }
  // While a CUDA graph is captured nothing is recorded: an event last
  // recorded in a capture cannot be waited on afterwards (cudaErrorCapturedEvent),
  // and the captured work runs only when the graph is replayed.
  void release(ThreadState& state) {
    cudaStream_t stream = current();
    if (capturing(stream)) return;
    state.last_stream = stream;
    DPT_CUDA_CHECK(cudaEventRecord(state.last_use, state.last_stream));
  }
  static bool capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    DPT_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
    return status != cudaStreamCaptureStatusNone;
  }

  // Scratch a CUDA graph being captured writes at every replay: its own
  // (cudaMalloc is legal in a relaxed capture), never shared with eager calls
  // or other graphs, which a replay on another stream is not ordered with;
  // kept until the thread ends, since the graph may outlive any scope here.
  void* graph_scratch(ThreadState& state, std::size_t bytes, const char* what) {
    state.captured_scratch.reserve(state.captured_scratch.size() + 1);  // no throw after the allocation
    void* scratch = gpu::allocate(device_, bytes);
    DPT_CHECK(scratch, what << " on cuda:" << device_ << ": no room for " << bytes << " bytes of partials");
    state.captured_scratch.push_back(scratch);
    return scratch;
  }
  // The block partials of a reduction (kMaxPartials 8-byte slots, then the
  // 8-byte result slot): the thread's own, or a captured graph's.
  void* partials(ThreadState& state) {
    if (!capturing(current())) return state.partials;
    return graph_scratch(state, (kMaxPartials + 1) * 8, "a reduction");
  }
  // `count` floats of scratch for sum_rows' partials, after acquire(). Outside
  // a capture: the thread's grow-only buffer (its earlier readers are ordered
  // before this call's stream by acquire(); a growth frees the old buffer with
  // cudaFree, which waits for the GPU). While a CUDA graph is captured: a
  // buffer of the graph's own (graph_scratch), since every replay writes it
  // and a later eager growth must not free it under the graph.
  float* column_partials(ThreadState& state, int64_t count) {
    std::size_t bytes = std::size_t(count) * sizeof(float);
    if (capturing(current())) return static_cast<float*>(graph_scratch(state, bytes, "sum_rows"));
    if (std::size_t(count) > state.column_partials_capacity) {
      // The old buffer's readers are done first: this stream's, and (acquire()
      // made this stream wait for them) another stream's last ones.
      DPT_CUDA_CHECK(cudaStreamSynchronize(current()));
      gpu::free(device_, state.column_partials);
      state.column_partials = nullptr, state.column_partials_capacity = 0;
      state.column_partials = static_cast<float*>(gpu::allocate(device_, bytes));
      DPT_CHECK(state.column_partials,
                "sum_rows on cuda:" << device_ << ": no room for " << count << " floats of partials");
      state.column_partials_capacity = std::size_t(count);
    }
    return state.column_partials;
  }

  // The thread's device copy of `rows` host labels. A training step asks
  // twice (forward, backward) for the same labels: the second time they are
  // already there and nothing is copied. Otherwise they go through pinned
  // host memory with an asynchronous copy on this stream (after earlier
  // readers of the device buffer), so the host never waits for the GPU here
  // and the copy can be captured in a CUDA graph. Before the pinned buffer is
  // rewritten, the previous copy out of it must have run: its event.
  // While a CUDA graph is captured, the labels go to buffers of the graph's
  // own (kept until the thread ends): every replay reads the labels of the
  // capture, whatever later eager steps upload.
  const int64_t* labels(ThreadState& state, const int64_t* host, int64_t rows) {
    if (rows <= 0) return state.labels;  // nothing to read
    std::size_t bytes = std::size_t(rows) * sizeof(int64_t);
    if (capturing(current())) return capture_labels(state, host, rows, bytes);
    if (rows == state.staged_rows && std::memcmp(state.staged, host, bytes) == 0) return state.labels;
    DPT_CUDA_CHECK(cudaEventSynchronize(state.staged_copied));  // never recorded: returns at once
    if (bytes > state.label_capacity) {  // grow-only; the frees wait for the GPU
      if (state.labels) gpu::free(device_, state.labels);
      if (state.staged) DPT_CUDA_CHECK(cudaFreeHost(state.staged));
      state.labels = nullptr, state.staged = nullptr;
      state.label_capacity = 0, state.staged_rows = -1;
      state.labels = static_cast<int64_t*>(gpu::allocate(device_, bytes));
      DPT_CHECK(state.labels, "cuda:" << device_ << ": no room for " << rows << " labels");
      void* pinned = nullptr;
      DPT_CUDA_CHECK(cudaMallocHost(&pinned, bytes));
      state.staged = static_cast<int64_t*>(pinned);
      state.label_capacity = bytes;
    }
    std::memcpy(state.staged, host, bytes);
    DPT_CUDA_CHECK(cudaMemcpyAsync(state.labels, state.staged, bytes, cudaMemcpyHostToDevice, current()));
    DPT_CUDA_CHECK(cudaEventRecord(state.staged_copied, current()));
    state.staged_rows = rows;
    return state.labels;
  }

  // The same labels again (backward after forward, a second capture) reuse
  // the last captured buffer: no second copy in the graph.
  const int64_t* capture_labels(ThreadState& state, const int64_t* labels, int64_t rows, std::size_t bytes) {
    if (!state.captured.empty() && state.captured.back().rows == rows &&
        std::memcmp(state.captured.back().pinned, labels, bytes) == 0)
      return state.captured.back().device;
    auto* device_copy = static_cast<int64_t*>(gpu::allocate(device_, bytes));  // legal: relaxed capture
    DPT_CHECK(device_copy, "cuda:" << device_ << ": no room for " << rows << " labels");
    void* pinned = nullptr;
    cudaError_t status = cudaMallocHost(&pinned, bytes);
    if (status != cudaSuccess) gpu::free(device_, device_copy);
    DPT_CUDA_CHECK(status);
    state.captured.push_back({device_copy, pinned, rows});
    std::memcpy(pinned, labels, bytes);
    DPT_CUDA_CHECK(cudaMemcpyAsync(device_copy, pinned, bytes, cudaMemcpyHostToDevice, current()));
    return device_copy;
  }

  cublasHandle_t blas_handle() { return thread_blas(device_); }  // device_ made current by current()

  int device_;
};
}  // namespace

cublasHandle_t cuda::thread_blas(int device) {
  ThreadState& state = thread_state(device, kPartialsBytes);
  if (!state.blas) DPT_CUBLAS_CHECK(cublasCreate(&state.blas));
  return state.blas;
}

Kernels& cuda_kernels(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaKernels>> instances;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = instances[device];
  if (!slot) {
    int count = gpu::device_count();
    if (count == 0) DPT_FAIL("kernels for cuda:" << device << ": " << gpu::unavailable_reason());
    DPT_CHECK(device >= 0 && device < count,
              "kernels for cuda:" << device << ": this process sees " << count << " GPU" << (count == 1 ? "" : "s"));
    slot = std::make_unique<CudaKernels>(device);
  }
  return *slot;
}

}  // namespace dpt
