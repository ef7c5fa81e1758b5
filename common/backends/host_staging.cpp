// host_staging.cpp — a Backend that hands GPU buffers to a host-only backend
// through host copies. The MPI backend sits behind it: Open MPI is not
// always built CUDA-aware, and a GPU pointer given to one that is not crashes
// inside the library. Host buffers pass straight through, untouched.
//
//   all_reduce(gpu)  ->  copy to host  ->  inner all_reduce  ->  copy back
//
// Left out: pinned staging buffers and pipelining the copies with the
// transfer (a CUDA-aware MPI or NCCL is the fast path; this one is correct).
#include "backends.h"
#include "comm/gpu_floats.h"

namespace dpt {
namespace detail {

namespace {

// The inner backend's view of a buffer: itself, or a host copy.
struct Staged : StagedFloats {
  Staged(const float* buffer, int64_t count, bool read) : StagedFloats(-1, buffer, count, read) {}
};

class HostStaging final : public Backend {
 public:
  HostStaging(std::unique_ptr<Backend> inner, int size) : inner_(std::move(inner)), size_(size) {}

  const char* name() const override { return inner_->name(); }
  bool thread_safe() const override { return inner_->thread_safe(); }

  void send(const float* data, int64_t count, int dst, int tag) override {
    Staged in(data, count, true);
    inner_->send(in.data(), count, dst, tag);
  }
  void recv(float* data, int64_t count, int src, int tag) override {
    Staged out(data, count, false);
    inner_->recv(out.data(), count, src, tag);
    out.write_back();
  }
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag) override {
    Staged in(send_buf, send_count, true), out(recv_buf, recv_count, false);
    inner_->sendrecv(in.data(), send_count, dst, out.data(), recv_count, src, tag);
    out.write_back();
  }
  void all_reduce(float* data, int64_t count, ReduceOp op) override {
    Staged both(data, count, true);
    inner_->all_reduce(both.data(), count, op);
    both.write_back();
  }
  void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op) override {
    Staged in(send_buf, recv_count * size_, true), out(recv_buf, recv_count, false);
    inner_->reduce_scatter(in.data(), out.data(), recv_count, op);
    out.write_back();
  }
  void all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override {
    // In place on the GPU (send_buf is a row of recv_buf) becomes two host
    // copies that do not overlap, which the inner backend handles as well.
    Staged in(send_buf, send_count, true), out(recv_buf, send_count * size_, false);
    inner_->all_gather(in.data(), out.data(), send_count);
    out.write_back();
  }
  void broadcast(float* data, int64_t count, int root) override {
    Staged both(data, count, true);
    inner_->broadcast(both.data(), count, root);
    both.write_back();
  }
  void barrier() override { inner_->barrier(); }
  void all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    inner_->all_gather_bytes(send, recv, bytes);  // launch's plumbing: always host memory
  }
  void fail(const std::string& message, bool primary) override { inner_->fail(message, primary); }
  RankFailure finish() override { return inner_->finish(); }
  SplitBackend split(int color, int key, const std::vector<int>& members) override {
    SplitBackend sub = inner_->split(color, key, members);
    sub.backend = stage_gpu_buffers(std::move(sub.backend), int(members.size()));
    return sub;
  }

 private:
  std::unique_ptr<Backend> inner_;
  const int size_;
};

}  // namespace

std::unique_ptr<Backend> stage_gpu_buffers(std::unique_ptr<Backend> inner, int size) {
  return std::make_unique<HostStaging>(std::move(inner), size);
}

}  // namespace detail
}  // namespace dpt
