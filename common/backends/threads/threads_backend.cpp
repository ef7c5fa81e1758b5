// threads_backend.cpp — the threads Backend: one per rank, all pointing at the
// same World (world.h), and make_threads_world that builds them.
//
// GPU buffers: Communicator has finished the rank's queued GPU work on them
// (peers read and write them from their own threads and streams); the
// World's copies are complete when they return.
#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {
namespace {

class ThreadsBackend final : public Backend {
 public:
  ThreadsBackend(std::shared_ptr<World> world, int rank) : world_(std::move(world)), me_(rank) {}

  const char* name() const override { return "threads"; }
  void send(const float* data, int64_t count, int dst, int tag) override {
    world_->send(me_, data, count, dst, tag);
  }
  void recv(float* data, int64_t count, int src, int tag) override {
    world_->recv(me_, data, count, src, tag);
  }
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag) override {
    world_->sendrecv(me_, send_buf, send_count, dst, recv_buf, recv_count, src, tag);
  }
  void all_reduce(float* data, int64_t count, ReduceOp op) override {
    world_->all_reduce(me_, data, count, op);
  }
  void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op) override {
    world_->reduce_scatter(me_, send_buf, recv_buf, recv_count, op);
  }
  void all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override {
    world_->all_gather(me_, send_buf, recv_buf, send_count);
  }
  void broadcast(float* data, int64_t count, int root) override { world_->broadcast(me_, data, count, root); }
  void barrier() override { world_->barrier(me_); }
  void all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    world_->all_gather_bytes(me_, send, recv, bytes);
  }
  void fail(const std::string& message, bool primary) override { world_->fail(me_, message, primary); }
  RankFailure finish() override { return world_->finish(me_); }
  SplitBackend split(int, int, const std::vector<int>& members) override {
    SubWorld sub = world_->split(me_, members);
    return {std::make_unique<ThreadsBackend>(std::move(sub.world), sub.rank), std::move(sub.traffic)};
  }

 private:
  std::shared_ptr<World> world_;
  const int me_;
};

}  // namespace
}  // namespace threads

std::vector<std::unique_ptr<Communicator>> make_threads_world(int size,
                                                              const ThreadsWorldOptions& o) {
  DPT_CHECK(size >= 1, "a world needs at least one rank, got " << size);
  DPT_CHECK(o.timeout_s > 0, "the communication timeout must be > 0 s, got " << o.timeout_s);
  DPT_CHECK(o.link.gbps >= 0 && o.link.latency_us >= 0,
            "link bandwidth and latency must be >= 0, got " << o.link.gbps << " Gbps, "
                                                            << o.link.latency_us << " us");
  DPT_CHECK(o.eager_limit_bytes >= 0, "the eager limit must be >= 0 bytes, got " << o.eager_limit_bytes);
  auto world = std::make_shared<threads::World>(size, o);
  TrafficLog log(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r)
    comms.push_back(CommAccess::wrap(std::make_unique<threads::ThreadsBackend>(world, r), r, size,
                                     o.timeout_s, log.view(r)));
  return comms;
}

}  // namespace detail
}  // namespace dpt
