// gpu_floats.cpp — copies, scratch and reductions for communicator buffers
// that may be GPU memory (gpu_floats.h).
#include "comm/gpu_floats.h"

#include <cstring>
#include <memory>
#include <vector>

#include "dpt/gpu.h"
#include "dpt/kernels.h"

namespace dpt {
namespace detail {

void finish_gpu_work(const void* ptr) {
  int device = gpu_of(ptr);
  if (device < 0) return;
  gpu::CurrentDeviceGuard keep;
  gpu::synchronize(device);
}

std::function<void()> after_queued_gpu_work(const void* data, std::function<void()> op) {
  int device = gpu_of(data);
  if (device < 0) return op;
  gpu::CurrentDeviceGuard keep;
  gpu::set_current_device(device);               // the event lives on data's GPU
  auto queued = std::make_shared<gpu::Event>();  // "this thread's work so far"
  queued->record(gpu::current_stream(device));
  return [queued, op = std::move(op)] {
    queued->synchronize();
    op();
  };
}

StagedFloats::StagedFloats(int home, const float* buffer, int64_t count, bool read)
    : buffer_(const_cast<float*>(buffer)), count_(count), data_(buffer_) {
  if (gpu_of(buffer) == home) return;
  copy_ = std::make_unique<Floats>(home, count);
  data_ = copy_->data();
  if (read) copy_floats(data_, buffer, count);
}

StagedFloats::~StagedFloats() = default;

void StagedFloats::write_back() {
  if (data_ != buffer_) copy_floats(buffer_, data_, count_);
}

namespace {
// out = max(out, in) elementwise, through host memory.
void max_through_host(float* out, const float* in, int64_t count) {
  std::vector<float> a(count), b(count);
  copy_floats(a.data(), out, count);
  copy_floats(b.data(), in, count);
  for (int64_t i = 0; i < count; ++i) a[i] = b[i] > a[i] ? b[i] : a[i];
  copy_floats(out, a.data(), count);
}
}  // namespace

void reduce_on_gpu(int device, float* out, const float* const* inputs, int n, int64_t count,
                   ReduceOp op, float* staging) {
  if (count == 0) return;
  Kernels& kernels = cuda_kernels(device);
  copy_floats(out, inputs[0], count);
  for (int k = 1; k < n; ++k) {
    if (op == ReduceOp::Max) {
      max_through_host(out, inputs[k], count);
      continue;
    }
    copy_floats(staging, inputs[k], count);     // in order on this thread's stream:
    kernels.add(out, out, staging, count);      // the next copy waits for this add
  }
  if (op == ReduceOp::Avg) kernels.divide(out, float(n), count);  // as the host path: a true division
  gpu::current_stream(device).synchronize();
}

}  // namespace detail
}  // namespace dpt
