// communicator.cpp — the public Communicator calls every backend shares.
//
// They are not virtual: each checks its arguments, keeps issue order with
// pending async work, times the call on the tracer, calls the backend
// (backend.h: one level of virtual dispatch), and records the bytes. So a
// backend (threads/, mpi/) is only the data movement.
//
//   ctx.comm.send(...)  ->  check, in_order, trace  ->  Backend::send
//                             threads: Mailbox (threads/mailbox.cpp)
//                             mpi:     MPI_Isend (mpi/point_to_point.cpp)
//
// Tensor overloads are in tensor_calls.cpp.
#include "dpt/comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "block_registry.h"
#include "comm/async_queue.h"
#include "comm/backend.h"
#include "comm/gpu_floats.h"
#include "dpt/span.h"

namespace dpt {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

// ----------------------------------------------------------------------------
// construction, plumbing

Communicator::Communicator(std::unique_ptr<detail::Backend> backend, int rank, int size,
                           double timeout_s, TrafficLog traffic)
    : backend_(std::move(backend)),
      rank_(rank),
      size_(size),
      backend_name_(backend_->name()),
      timeout_s_(timeout_s),
      traffic_(std::move(traffic)),
      async_(std::make_unique<detail::AsyncQueue>(rank)) {
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
}

// async_ is declared after backend_, so it is destroyed first: the progress
// thread drains and joins while the backend it calls still exists.
Communicator::~Communicator() = default;

namespace detail {
std::unique_ptr<Communicator> CommAccess::wrap(std::unique_ptr<Backend> backend, int rank, int size,
                                               double timeout_s, TrafficLog traffic) {
  return std::unique_ptr<Communicator>(
      new Communicator(std::move(backend), rank, size, timeout_s, std::move(traffic)));
}

void CommAccess::all_gather_bytes(Communicator& comm, const void* send, void* recv, int64_t bytes) {
  DPT_CHECK(bytes >= 0, "all_gather_bytes: bytes must be >= 0, got " << bytes);
  comm.in_order([&] { comm.backend_->all_gather_bytes(send, recv, bytes); });
}

void CommAccess::fail(Communicator& comm, const std::string& message, bool primary) {
  comm.backend_->fail(message, primary);
}

RankFailure CommAccess::finish(Communicator& comm) { return comm.backend_->finish(); }
}  // namespace detail

// ----------------------------------------------------------------------------
// async

std::shared_ptr<Work> Communicator::async(std::function<void()> op) {
  if (!backend_->thread_safe()) return detail::AsyncQueue::run_now(op);
  return async_->submit(std::move(op));
}

void Communicator::synchronize() { async_->synchronize(); }

// A blocking call made while async work is pending runs behind that work, on
// the progress thread, so calls reach the backend in the order they were made.
template <class Body>
void Communicator::in_order(Body&& body) {
  if (async_->must_queue()) {
    async([&body] { body(); })->wait();
    return;
  }
  body();
}

std::shared_ptr<Work> Communicator::all_reduce_async(float* data, int64_t count, ReduceOp op) {
  DPT_CHECK(count >= 0, "all_reduce_async: count must be >= 0, got " << count);
  DPT_CHECK(count == 0 || data != nullptr, "all_reduce_async: null buffer for " << count << " floats");
  return async(detail::after_queued_gpu_work(data, [this, data, count, op] { all_reduce(data, count, op); }));
}

// ----------------------------------------------------------------------------
// point-to-point and collectives: check, order, trace, dispatch, record
//
// GPU buffers: the calling thread's queued work on them is finished first,
// here on the calling thread (a call may run on the progress thread, whose
// streams know nothing of this thread's kernels), so every backend reads
// inputs that are written and overwrites outputs nobody still reads.

namespace {
void check_count(int64_t count, const void* data, const char* call) {
  DPT_CHECK(count >= 0, call << ": count must be >= 0, got " << count);
  DPT_CHECK(count == 0 || data != nullptr, call << ": null buffer for " << count << " floats");
}

void check_peer(int peer, int size, const char* call) {
  DPT_CHECK(peer >= 0 && peer < size,
            call << ": rank " << peer << " does not exist (ranks are 0.." << size - 1 << ")");
}

void check_tag(int tag, const char* call) {
  DPT_CHECK(tag >= 0 && tag <= 32767, call << ": tags are 0..32767, got " << tag);
}
}  // namespace

void Communicator::send(const float* data, int64_t count, int dst, int tag) {
  check_count(count, data, "send");
  detail::check_float_range(data, count, "send", "buffer");
  check_peer(dst, size_, "send");
  check_tag(tag, "send");
  detail::finish_gpu_work(data);
  in_order([&] {
    TraceSpan span(tracer_, span_name("send"), "comm", {{"bytes", 4.0 * count}, {"peer", double(dst)}});
    backend_->send(data, count, dst, tag);
    traffic_.record_send(dst, 4 * count);
  });
}

void Communicator::recv(float* data, int64_t count, int src, int tag) {
  check_count(count, data, "recv");
  detail::check_float_range(data, count, "recv", "receive buffer");
  check_peer(src, size_, "recv");
  check_tag(tag, "recv");
  detail::finish_gpu_work(data);
  in_order([&] {
    TraceSpan span(tracer_, span_name("recv"), "comm", {{"bytes", 4.0 * count}, {"peer", double(src)}});
    backend_->recv(data, count, src, tag);
  });
}

void Communicator::sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                            int64_t recv_count, int src, int tag) {
  check_count(send_count, send_buf, "sendrecv");
  check_count(recv_count, recv_buf, "sendrecv");
  detail::check_float_range(send_buf, send_count, "sendrecv", "send buffer");
  detail::check_float_range(recv_buf, recv_count, "sendrecv", "receive buffer");
  check_peer(dst, size_, "sendrecv");
  check_peer(src, size_, "sendrecv");
  check_tag(tag, "sendrecv");
  detail::finish_gpu_work(send_buf);
  detail::finish_gpu_work(recv_buf);
  in_order([&] {
    TraceSpan span(tracer_, span_name("sendrecv"), "comm",
                   {{"bytes", 4.0 * send_count}, {"peer", double(dst)}, {"from", double(src)}});
    backend_->sendrecv(send_buf, send_count, dst, recv_buf, recv_count, src, tag);
    traffic_.record_send(dst, 4 * send_count);
  });
}

void Communicator::all_reduce(float* data, int64_t count, ReduceOp op) {
  check_count(count, data, "all_reduce");
  detail::finish_gpu_work(data);
  in_order([&] {
    TraceSpan span(tracer_, span_name("all_reduce"), "comm", {{"bytes", 4.0 * count}});
    backend_->all_reduce(data, count, op);
    traffic_.record_collective("all_reduce", 4 * count);
  });
}

void Communicator::reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                                  ReduceOp op) {
  check_count(recv_count, recv_buf, "reduce_scatter");
  check_count(recv_count * size_, send_buf, "reduce_scatter");
  detail::finish_gpu_work(send_buf);
  detail::finish_gpu_work(recv_buf);
  in_order([&] {
    TraceSpan span(tracer_, span_name("reduce_scatter"), "comm", {{"bytes", 4.0 * recv_count * size_}});
    backend_->reduce_scatter(send_buf, recv_buf, recv_count, op);
    traffic_.record_collective("reduce_scatter", 4 * recv_count * size_);
  });
}

void Communicator::all_gather(const float* send_buf, float* recv_buf, int64_t send_count) {
  check_count(send_count, send_buf, "all_gather");
  check_count(send_count * size_, recv_buf, "all_gather");
  detail::finish_gpu_work(send_buf);
  detail::finish_gpu_work(recv_buf);
  in_order([&] {
    TraceSpan span(tracer_, span_name("all_gather"), "comm", {{"bytes", 4.0 * send_count}});
    backend_->all_gather(send_buf, recv_buf, send_count);
    traffic_.record_collective("all_gather", 4 * send_count);
  });
}

void Communicator::broadcast(float* data, int64_t count, int root) {
  check_count(count, data, "broadcast");
  check_peer(root, size_, "broadcast");
  detail::finish_gpu_work(data);
  in_order([&] {
    TraceSpan span(tracer_, span_name("broadcast"), "comm", {{"bytes", 4.0 * count}, {"root", double(root)}});
    backend_->broadcast(data, count, root);
    traffic_.record_collective("broadcast", 4 * count);
  });
}

void Communicator::barrier() {
  in_order([&] {
    TraceSpan span(tracer_, span_name("barrier"), "comm");
    backend_->barrier();
    traffic_.record_collective("barrier", 0);
  });
}

// ----------------------------------------------------------------------------
// typed messages

namespace {
// Typed messages (the templates in communicator.h): B bytes of host memory
// travel as ceil(B/4) 4-byte words through the backend's float path, which
// copies words bit for bit (no arithmetic touches them), so every backend's
// ordering, rendezvous, timeout and failure rules hold unchanged. A buffer
// that is not whole aligned words is copied into words first. The all-gather
// is the backends' byte all-gather. The log and the trace count the B bytes.
void check_bytes(int64_t bytes, const void* data, const char* call) {
  DPT_CHECK(bytes >= 0, call << ": byte count must be >= 0, got " << bytes);
  DPT_CHECK(bytes == 0 || data != nullptr, call << ": null buffer for " << bytes << " bytes");
  DPT_CHECK(bytes == 0 || gpu_of(data) < 0,
            call << ": typed messages are host memory (integers and small records); GPU data goes as floats or tensors");
}

int64_t words_of(int64_t bytes) { return (bytes + 3) / 4; }

// True when the buffer can go as it is: whole words, aligned as floats.
bool as_words(const void* data, int64_t bytes) {
  return bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(data) % alignof(float) == 0;
}
}  // namespace

void Communicator::send_bytes(const void* data, int64_t bytes, int dst, int tag) {
  check_bytes(bytes, data, "send");
  check_peer(dst, size_, "send");
  check_tag(tag, "send");
  std::vector<float> words;
  const float* wire = static_cast<const float*>(data);
  if (!as_words(data, bytes)) {
    words.assign(std::size_t(words_of(bytes)), 0.0f);
    if (bytes) std::memcpy(words.data(), data, std::size_t(bytes));
    wire = words.data();
  }
  in_order([&] {
    TraceSpan span(tracer_, span_name("send"), "comm", {{"bytes", double(bytes)}, {"peer", double(dst)}});
    backend_->send(wire, words_of(bytes), dst, tag);
    traffic_.record_send(dst, bytes);
  });
}

void Communicator::recv_bytes(void* data, int64_t bytes, int src, int tag) {
  check_bytes(bytes, data, "recv");
  check_peer(src, size_, "recv");
  check_tag(tag, "recv");
  std::vector<float> words;
  const bool direct = as_words(data, bytes);
  float* wire = static_cast<float*>(data);
  if (!direct) {
    words.resize(std::size_t(words_of(bytes)));
    wire = words.data();
  }
  in_order([&] {
    TraceSpan span(tracer_, span_name("recv"), "comm", {{"bytes", double(bytes)}, {"peer", double(src)}});
    backend_->recv(wire, words_of(bytes), src, tag);
  });
  if (!direct && bytes) std::memcpy(data, words.data(), std::size_t(bytes));
}

void Communicator::all_gather_bytes(const void* send_buf, void* recv_buf, int64_t bytes) {
  check_bytes(bytes, send_buf, "all_gather");
  check_bytes(bytes * size_, recv_buf, "all_gather");
  // Backends gather from a buffer apart from the result (MPI has no in-place
  // byte gather here): a send buffer inside recv_buf is copied out first.
  std::vector<char> apart;
  if (detail::overlaps(send_buf, std::size_t(bytes), recv_buf, std::size_t(bytes * size_))) {
    apart.assign(static_cast<const char*>(send_buf), static_cast<const char*>(send_buf) + bytes);
    send_buf = apart.data();
  }
  in_order([&] {
    TraceSpan span(tracer_, span_name("all_gather"), "comm", {{"bytes", double(bytes)}});
    backend_->all_gather_bytes(send_buf, recv_buf, bytes);
    traffic_.record_collective("all_gather", bytes);
  });
}

TrafficLog Communicator::gather_traffic() {
  // Two rounds: the record counts (they differ per rank), then the records
  // padded to the longest, since all_gather_bytes moves equal sizes.
  std::vector<int64_t> mine = traffic_.own_records();
  int64_t words = int64_t(mine.size());
  std::vector<int64_t> words_of(size_);
  detail::CommAccess::all_gather_bytes(*this, &words, words_of.data(), sizeof(int64_t));
  int64_t longest = *std::max_element(words_of.begin(), words_of.end());
  mine.resize(longest, 0);
  std::vector<int64_t> all(std::size_t(longest) * size_);
  detail::CommAccess::all_gather_bytes(*this, mine.data(), all.data(),
                                       longest * int64_t(sizeof(int64_t)));
  TrafficLog log(size_);
  for (int r = 0; r < size_; ++r)
    log.merge_records(std::vector<int64_t>(all.begin() + r * longest,
                                           all.begin() + r * longest + words_of[r]));
  return log;
}

}  // namespace dpt
