// watch.cpp — watch_messages: a Backend that forwards to another
// communicator's backend and calls an observer before each message.
#include "dpt/comm/watch.h"

#include "comm/backend.h"

namespace dpt {
namespace {

class WatchingBackend : public detail::Backend {
 public:
  WatchingBackend(Communicator& inner, MessageObserver before)
      : inner_(inner), to_(detail::CommAccess::backend(inner)), before_(std::move(before)) {}

  const char* name() const override { return to_.name(); }
  void send(const float* data, int64_t count, int dst, int tag) override {
    before_({"send", dst, count, -1, 0, data, nullptr});
    to_.send(data, count, dst, tag);
  }
  void recv(float* data, int64_t count, int src, int tag) override {
    before_({"recv", -1, 0, src, count, nullptr, data});
    to_.recv(data, count, src, tag);
  }
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf, int64_t recv_count, int src,
                int tag) override {
    before_({"sendrecv", dst, send_count, src, recv_count, send_buf, recv_buf});
    to_.sendrecv(send_buf, send_count, dst, recv_buf, recv_count, src, tag);
  }
  void all_reduce(float* data, int64_t count, ReduceOp op) override { to_.all_reduce(data, count, op); }
  void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op) override {
    to_.reduce_scatter(send_buf, recv_buf, recv_count, op);
  }
  void all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override {
    to_.all_gather(send_buf, recv_buf, send_count);
  }
  void broadcast(float* data, int64_t count, int root) override { to_.broadcast(data, count, root); }
  void barrier() override { to_.barrier(); }
  void all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    to_.all_gather_bytes(send, recv, bytes);
  }
  bool thread_safe() const override { return to_.thread_safe(); }
  // A failure while watched is the rank's failure: the inner communicator's
  // peers must hear of it. launch() finishes the inner one, never this.
  void fail(const std::string& message, bool primary) override { detail::CommAccess::fail(inner_, message, primary); }
  detail::RankFailure finish() override { return {}; }
  // A group split off a watched communicator is not watched.
  detail::SplitBackend split(int color, int key, const std::vector<int>& members) override {
    return to_.split(color, key, members);
  }

 private:
  Communicator& inner_;
  detail::Backend& to_;
  MessageObserver before_;
};

}  // namespace

std::unique_ptr<Communicator> watch_messages(Communicator& inner, MessageObserver before) {
  auto watched = detail::CommAccess::wrap(std::make_unique<WatchingBackend>(inner, std::move(before)), inner.rank(),
                                          inner.size(), inner.timeout_s(), inner.traffic());
  detail::CommAccess::set_tracer(*watched, detail::CommAccess::tracer(inner));
  return watched;
}

}  // namespace dpt
