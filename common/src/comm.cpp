// comm.cpp — what every backend shares: argument checks, the traffic log,
// trace spans, the async progress thread, Tensor conveniences, link presets.
//
// The public Communicator calls live here and are not virtual: they check
// their arguments, keep issue order with pending async work, time the call on
// the tracer, call the backend's do_* function, and record the bytes. So a
// backend (comm_threads.cpp, comm_mpi.cpp) is only the data movement.
#include "dpt/comm.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "dpt/device.h"
#include "dpt/trace.h"

namespace dpt {

// ----------------------------------------------------------------------------
// reduce ops, link presets

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "avg"; }

double LinkModel::transfer_seconds(int64_t bytes) const {
  return gbps > 0 ? 8.0 * double(bytes) / (gbps * 1e9) : 0.0;
}

std::string LinkModel::describe() const {
  if (!enabled()) return "none";
  char text[128];
  if (gbps > 0) {
    std::snprintf(text, sizeof text, "%.3g GB/s (%g Gbit/s), %g us latency", gbps / 8, gbps,
                  latency_us);
  } else {
    std::snprintf(text, sizeof text, "unlimited bandwidth, %g us latency", latency_us);
  }
  return text;
}

// Round numbers for one direction of one link, close to what benchmarks see
// (not the marketing peak):
//   pcie       PCIe 4.0 x16: 31.5 GB/s raw per direction, ~25 GB/s in
//              cudaMemcpy benchmarks; ~10 us for a small host<->device copy.
//   nvlink     NVLink 3 (A100 SXM): 12 links x 25 GB/s = 300 GB/s per
//              direction; a few us per message in NCCL's small-message tests.
//   ethernet   10 GbE with TCP: 10 Gbit/s; ~50 us one-way through the kernel
//              network stack and a switch.
//   infiniband HDR (ConnectX-6): 200 Gbit/s; ~2 us MPI ping-pong latency.
LinkModel link_preset(const std::string& name) {
  if (name == "none" || name.empty()) return {};
  if (name == "pcie") return {10.0, 200.0};
  if (name == "nvlink") return {3.0, 2400.0};
  if (name == "ethernet") return {50.0, 10.0};
  if (name == "infiniband") return {2.0, 200.0};
  DPT_FAIL("unknown link '" << name << "': expected none, pcie, nvlink, ethernet or infiniband");
}

const std::vector<std::string>& link_preset_names() {
  static const std::vector<std::string> names = {"none", "pcie", "nvlink", "ethernet",
                                                 "infiniband"};
  return names;
}

// ----------------------------------------------------------------------------
// traffic log

namespace {
const char* const kCollectiveNames[] = {"all_reduce", "reduce_scatter", "all_gather",
                                        "broadcast", "barrier"};
constexpr int kCollectives = 5;
constexpr int kRecordWords = 6;  // {kind, step, src|rank, dst, bytes, messages|calls}

int collective_index(const std::string& name) {
  for (int i = 0; i < kCollectives; ++i)
    if (name == kCollectiveNames[i]) return i;
  DPT_FAIL("unknown collective '" << name
                                  << "': expected all_reduce, reduce_scatter, all_gather, "
                                     "broadcast or barrier");
}
}  // namespace

struct TrafficLog::Table {
  explicit Table(int world_size) : world(world_size), step(new std::atomic<int64_t>[world_size]) {
    for (int r = 0; r < world; ++r) step[r] = 0;
  }
  struct Cell {
    int64_t bytes = 0;
    int64_t count = 0;  // messages or calls
  };
  const int world;
  std::unique_ptr<std::atomic<int64_t>[]> step;  // per rank; read by its progress thread
  mutable std::mutex mutex;
  using Key = std::tuple<int64_t, int, int>;           // (step, src, dst)
  std::map<Key, Cell> sends;
  std::map<std::pair<int, int>, Cell> collectives;      // (collective, rank)

  // Sum of one field (bytes or count) over the sends whose key passes `keep`.
  template <class Keep>
  int64_t sum(int64_t Cell::*field, Keep&& keep) const {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t total = 0;
    for (const auto& [key, cell] : sends)
      if (keep(key)) total += cell.*field;
    return total;
  }
};

TrafficLog::TrafficLog(int world) : table_(std::make_shared<Table>(world)) {
  DPT_CHECK(world >= 1, "a traffic log needs at least one rank, got " << world);
}

TrafficLog TrafficLog::view(int rank) const {
  DPT_CHECK(rank >= 0 && rank < world(), "rank " << rank << " is outside 0.." << world() - 1);
  return TrafficLog(table_, rank);
}

int TrafficLog::world() const { return table_->world; }

void TrafficLog::set_step(int64_t step) {
  DPT_CHECK(rank_ >= 0, "set_step on a standalone traffic log: use a communicator's traffic()");
  DPT_CHECK(step >= 0, "steps are >= 0, got " << step);
  table_->step[rank_] = step;
}

void TrafficLog::begin_step() { set_step(step() + 1); }

int64_t TrafficLog::step() const { return rank_ >= 0 ? table_->step[rank_].load() : 0; }

void TrafficLog::record_send(int dst, int64_t bytes) {
  DPT_CHECK(rank_ >= 0, "record_send on a standalone traffic log");
  std::lock_guard<std::mutex> lock(table_->mutex);
  Table::Cell& cell = table_->sends[{table_->step[rank_].load(), rank_, dst}];
  cell.bytes += bytes;
  cell.count += 1;
}

void TrafficLog::record_collective(const std::string& name, int64_t bytes) {
  DPT_CHECK(rank_ >= 0, "record_collective on a standalone traffic log");
  int index = collective_index(name);
  std::lock_guard<std::mutex> lock(table_->mutex);
  Table::Cell& cell = table_->collectives[{index, rank_}];
  cell.bytes += bytes;
  cell.count += 1;
}

int64_t TrafficLog::bytes(int src, int dst) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<1>(k) == src && std::get<2>(k) == dst; });
}

int64_t TrafficLog::bytes(int src, int dst, int64_t step) const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  auto it = table_->sends.find({step, src, dst});
  return it == table_->sends.end() ? 0 : it->second.bytes;
}

int64_t TrafficLog::messages(int src, int dst) const {
  return table_->sum(&Table::Cell::count, [&](const Table::Key& k) { return std::get<1>(k) == src && std::get<2>(k) == dst; });
}

int64_t TrafficLog::bytes_sent(int rank) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<1>(k) == rank; });
}

int64_t TrafficLog::bytes_received(int rank) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<2>(k) == rank; });
}

int64_t TrafficLog::step_bytes(int64_t step) const {
  return table_->sum(&Table::Cell::bytes, [&](const Table::Key& k) { return std::get<0>(k) == step; });
}

int64_t TrafficLog::total_bytes() const {
  return table_->sum(&Table::Cell::bytes, [](const Table::Key&) { return true; });
}

std::vector<std::vector<int64_t>> TrafficLog::matrix() const {
  std::vector<std::vector<int64_t>> m(world(), std::vector<int64_t>(world(), 0));
  std::lock_guard<std::mutex> lock(table_->mutex);
  for (const auto& [key, cell] : table_->sends) m[std::get<1>(key)][std::get<2>(key)] += cell.bytes;
  return m;
}

std::vector<int64_t> TrafficLog::steps() const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  std::vector<int64_t> out;
  for (const auto& entry : table_->sends)  // keys sort by step first
    if (out.empty() || out.back() != std::get<0>(entry.first)) out.push_back(std::get<0>(entry.first));
  return out;
}

int64_t TrafficLog::collective_bytes(const std::string& name, int rank) const {
  int index = collective_index(name);
  std::lock_guard<std::mutex> lock(table_->mutex);
  int64_t total = 0;
  for (const auto& [key, cell] : table_->collectives)
    if (key.first == index && (rank < 0 || key.second == rank)) total += cell.bytes;
  return total;
}

int64_t TrafficLog::collective_calls(const std::string& name, int rank) const {
  int index = collective_index(name);
  std::lock_guard<std::mutex> lock(table_->mutex);
  int64_t total = 0;
  for (const auto& [key, cell] : table_->collectives)
    if (key.first == index && (rank < 0 || key.second == rank)) total += cell.count;
  return total;
}

void TrafficLog::clear() {
  std::lock_guard<std::mutex> lock(table_->mutex);
  table_->sends.clear();
  table_->collectives.clear();
}

std::string TrafficLog::to_string() const {
  auto m = matrix();
  std::ostringstream out;
  char cell[32];
  out << "bytes sent (row: from rank, column: to rank)\n" << "        ";
  for (int dst = 0; dst < world(); ++dst) {
    std::snprintf(cell, sizeof cell, "%12s", ("to " + std::to_string(dst)).c_str());
    out << cell;
  }
  for (int src = 0; src < world(); ++src) {
    std::snprintf(cell, sizeof cell, "\nfrom %-3d", src);
    out << cell;
    for (int dst = 0; dst < world(); ++dst) {
      std::string text = m[src][dst] ? format_bytes(double(m[src][dst])) : "-";
      std::snprintf(cell, sizeof cell, "%12s", text.c_str());
      out << cell;
    }
  }
  return out.str() + "\n";
}

std::vector<int64_t> TrafficLog::own_records() const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  std::vector<int64_t> out;
  for (const auto& [key, cell] : table_->sends) {
    auto [step, src, dst] = key;
    if (src == rank_) out.insert(out.end(), {0, step, src, dst, cell.bytes, cell.count});
  }
  for (const auto& [key, cell] : table_->collectives)
    if (key.second == rank_)
      out.insert(out.end(), {1 + key.first, 0, key.second, -1, cell.bytes, cell.count});
  return out;
}

void TrafficLog::merge_records(const std::vector<int64_t>& records) {
  DPT_CHECK(records.size() % kRecordWords == 0,
            "traffic records come in groups of " << kRecordWords << ", got " << records.size());
  std::lock_guard<std::mutex> lock(table_->mutex);
  for (std::size_t i = 0; i < records.size(); i += kRecordWords) {
    const int64_t* r = &records[i];
    Table::Cell& cell = r[0] == 0 ? table_->sends[{r[1], int(r[2]), int(r[3])}]
                                  : table_->collectives[{int(r[0] - 1), int(r[2])}];
    cell.bytes += r[4];
    cell.count += r[5];
  }
}

// ----------------------------------------------------------------------------
// async work: one progress thread per communicator, running jobs in issue order

Work::~Work() = default;

namespace {
class QueuedWork final : public Work {
 public:
  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_; });
    observed_ = true;
    if (error_) std::rethrow_exception(error_);
  }
  bool done() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void complete(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
    finished_.notify_all();
  }
  // The error, if nobody has wait()ed for it yet (marks it seen).
  std::exception_ptr take_unobserved_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_ || observed_) return nullptr;
    observed_ = true;
    return error_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false, observed_ = false;
  std::exception_ptr error_;
};

std::shared_ptr<QueuedWork> run_now(const std::function<void()>& op) {
  auto work = std::make_shared<QueuedWork>();
  try {
    op();
    work->complete(nullptr);
  } catch (...) {
    work->complete(std::current_exception());
  }
  return work;
}
}  // namespace

struct Communicator::AsyncQueue {
  std::mutex mutex;
  std::condition_variable wake;  // a job was queued, or stop
  std::condition_variable idle;  // the queue ran dry
  std::deque<std::pair<std::function<void()>, std::shared_ptr<QueuedWork>>> jobs;
  bool running = false;  // a job is executing on the thread
  bool stop = false;
  std::thread thread;
  std::thread::id thread_id;
  std::vector<std::shared_ptr<QueuedWork>> failed;
};

Communicator::Communicator(int rank, int size, std::string backend, double timeout_s,
                           TrafficLog traffic)
    : rank_(rank),
      size_(size),
      backend_(std::move(backend)),
      timeout_s_(timeout_s),
      traffic_(std::move(traffic)),
      async_(std::make_unique<AsyncQueue>()) {
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
}

Communicator::~Communicator() { stop_async(); }

void Communicator::stop_async() {
  {
    std::lock_guard<std::mutex> lock(async_->mutex);
    if (!async_->thread.joinable()) return;
    async_->stop = true;
    async_->wake.notify_all();
  }
  async_->thread.join();  // the thread drains queued jobs before it exits
}

std::shared_ptr<Work> Communicator::async(std::function<void()> op) {
  if (!thread_safe()) return run_now(op);
  auto work = std::make_shared<QueuedWork>();
  std::lock_guard<std::mutex> lock(async_->mutex);
  DPT_CHECK(!async_->stop, "async work issued on a communicator that is shutting down");
  if (!async_->thread.joinable()) {
    int rank = rank_;
    AsyncQueue* q = async_.get();
    async_->thread = std::thread([q, rank] {
      set_error_rank(rank);
      Tracer::set_thread_lane(1);
      std::unique_lock<std::mutex> lock(q->mutex);
      for (;;) {
        q->wake.wait(lock, [&] { return q->stop || !q->jobs.empty(); });
        if (q->jobs.empty()) break;  // stop requested and nothing left
        auto job = std::move(q->jobs.front());
        q->jobs.pop_front();
        q->running = true;
        lock.unlock();
        std::exception_ptr error;
        try {
          job.first();
        } catch (...) {
          error = std::current_exception();
        }
        job.first = nullptr;  // release what the job captured before signalling
        job.second->complete(error);
        lock.lock();
        q->running = false;
        if (error) q->failed.push_back(job.second);
        if (q->jobs.empty()) q->idle.notify_all();
      }
    });
    async_->thread_id = async_->thread.get_id();
  }
  async_->jobs.emplace_back(std::move(op), work);
  async_->wake.notify_all();
  return work;
}

void Communicator::synchronize() {
  std::vector<std::shared_ptr<QueuedWork>> failed;
  {
    std::unique_lock<std::mutex> lock(async_->mutex);
    if (std::this_thread::get_id() == async_->thread_id) return;  // called from a job
    async_->idle.wait(lock, [&] { return !async_->running && async_->jobs.empty(); });
    failed.swap(async_->failed);
  }
  for (auto& work : failed)
    if (auto error = work->take_unobserved_error()) std::rethrow_exception(error);
}

bool Communicator::must_queue() {
  std::lock_guard<std::mutex> lock(async_->mutex);
  return std::this_thread::get_id() != async_->thread_id &&
         (async_->running || !async_->jobs.empty());
}

// A blocking call made while async work is pending runs behind that work, on
// the progress thread, so calls reach the backend in the order they were made.
template <class Body>
void Communicator::in_order(Body&& body) {
  if (must_queue()) {
    async([&body] { body(); })->wait();
    return;
  }
  body();
}

std::shared_ptr<Work> Communicator::all_reduce_async(float* data, int64_t count, ReduceOp op) {
  DPT_CHECK(count >= 0, "all_reduce_async: count must be >= 0, got " << count);
  DPT_CHECK(count == 0 || data != nullptr, "all_reduce_async: null buffer for " << count << " floats");
  return async([this, data, count, op] { all_reduce(data, count, op); });
}

// ----------------------------------------------------------------------------
// point-to-point and collectives: check, order, trace, dispatch, record

namespace {
void check_count(int64_t count, const void* data, const char* call) {
  DPT_CHECK(count >= 0, call << ": count must be >= 0, got " << count);
  DPT_CHECK(count == 0 || data != nullptr, call << ": null buffer for " << count << " floats");
}
}  // namespace

#define DPT_CHECK_PEER(peer, call)                                                           \
  DPT_CHECK((peer) >= 0 && (peer) < size_,                                                 \
            call << ": rank " << (peer) << " does not exist (ranks are 0.." << size_ - 1 << ")")
#define DPT_CHECK_TAG(tag, call) \
  DPT_CHECK((tag) >= 0 && (tag) <= 32767, call << ": tags are 0..32767, got " << (tag))

void Communicator::send(const float* data, int64_t count, int dst, int tag) {
  check_count(count, data, "send");
  DPT_CHECK_PEER(dst, "send");
  DPT_CHECK_TAG(tag, "send");
  in_order([&] {
    TraceSpan span(tracer_, "send", "comm", {{"bytes", 4.0 * count}, {"peer", double(dst)}});
    do_send(data, count, dst, tag);
    traffic_.record_send(dst, 4 * count);
  });
}

void Communicator::recv(float* data, int64_t count, int src, int tag) {
  check_count(count, data, "recv");
  DPT_CHECK_PEER(src, "recv");
  DPT_CHECK_TAG(tag, "recv");
  in_order([&] {
    TraceSpan span(tracer_, "recv", "comm", {{"bytes", 4.0 * count}, {"peer", double(src)}});
    do_recv(data, count, src, tag);
  });
}

void Communicator::sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                            int64_t recv_count, int src, int tag) {
  check_count(send_count, send_buf, "sendrecv");
  check_count(recv_count, recv_buf, "sendrecv");
  DPT_CHECK_PEER(dst, "sendrecv");
  DPT_CHECK_PEER(src, "sendrecv");
  DPT_CHECK_TAG(tag, "sendrecv");
  in_order([&] {
    TraceSpan span(tracer_, "sendrecv", "comm",
                   {{"bytes", 4.0 * send_count}, {"peer", double(dst)}, {"from", double(src)}});
    do_sendrecv(send_buf, send_count, dst, recv_buf, recv_count, src, tag);
    traffic_.record_send(dst, 4 * send_count);
  });
}

void Communicator::all_reduce(float* data, int64_t count, ReduceOp op) {
  check_count(count, data, "all_reduce");
  in_order([&] {
    TraceSpan span(tracer_, "all_reduce", "comm", {{"bytes", 4.0 * count}});
    do_all_reduce(data, count, op);
    traffic_.record_collective("all_reduce", 4 * count);
  });
}

void Communicator::reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                                  ReduceOp op) {
  check_count(recv_count, recv_buf, "reduce_scatter");
  check_count(recv_count * size_, send_buf, "reduce_scatter");
  in_order([&] {
    TraceSpan span(tracer_, "reduce_scatter", "comm", {{"bytes", 4.0 * recv_count * size_}});
    do_reduce_scatter(send_buf, recv_buf, recv_count, op);
    traffic_.record_collective("reduce_scatter", 4 * recv_count * size_);
  });
}

void Communicator::all_gather(const float* send_buf, float* recv_buf, int64_t send_count) {
  check_count(send_count, send_buf, "all_gather");
  check_count(send_count * size_, recv_buf, "all_gather");
  in_order([&] {
    TraceSpan span(tracer_, "all_gather", "comm", {{"bytes", 4.0 * send_count}});
    do_all_gather(send_buf, recv_buf, send_count);
    traffic_.record_collective("all_gather", 4 * send_count);
  });
}

void Communicator::broadcast(float* data, int64_t count, int root) {
  check_count(count, data, "broadcast");
  DPT_CHECK_PEER(root, "broadcast");
  in_order([&] {
    TraceSpan span(tracer_, "broadcast", "comm", {{"bytes", 4.0 * count}, {"root", double(root)}});
    do_broadcast(data, count, root);
    traffic_.record_collective("broadcast", 4 * count);
  });
}

void Communicator::barrier() {
  in_order([&] {
    TraceSpan span(tracer_, "barrier", "comm");
    do_barrier();
    traffic_.record_collective("barrier", 0);
  });
}

void Communicator::all_gather_bytes(const void* send, void* recv, int64_t bytes) {
  DPT_CHECK(bytes >= 0, "all_gather_bytes: bytes must be >= 0, got " << bytes);
  in_order([&] { do_all_gather_bytes(send, recv, bytes); });
}

TrafficLog Communicator::gather_traffic() {
  // Two rounds: the record counts (they differ per rank), then the records
  // padded to the longest, since all_gather_bytes moves equal sizes.
  std::vector<int64_t> mine = traffic_.own_records();
  int64_t words = int64_t(mine.size());
  std::vector<int64_t> words_of(size_);
  all_gather_bytes(&words, words_of.data(), sizeof(int64_t));
  int64_t longest = *std::max_element(words_of.begin(), words_of.end());
  mine.resize(longest, 0);
  std::vector<int64_t> all(std::size_t(longest) * size_);
  all_gather_bytes(mine.data(), all.data(), longest * int64_t(sizeof(int64_t)));
  TrafficLog log(size_);
  for (int r = 0; r < size_; ++r)
    log.merge_records(std::vector<int64_t>(all.begin() + r * longest,
                                           all.begin() + r * longest + words_of[r]));
  return log;
}

// ----------------------------------------------------------------------------
// Tensor conveniences

namespace {
void check_host_tensor(const Tensor& t, const char* call) {
  DPT_CHECK(t.defined(), call << ": the tensor is undefined");
  DPT_CHECK(t.device().is_host_memory(),
            call << ": the tensor is on " << t.device().name()
                 << "; this communicator moves host memory only (copy it with .to(Device::host()))");
}
}  // namespace

void Communicator::send(const Tensor& tensor, int dst, int tag) {
  check_host_tensor(tensor, "send");
  send(tensor.data(), tensor.numel(), dst, tag);
}

void Communicator::recv(Tensor tensor, int src, int tag) {
  check_host_tensor(tensor, "recv");
  recv(tensor.data(), tensor.numel(), src, tag);
}

void Communicator::sendrecv(const Tensor& send_tensor, int dst, Tensor recv_tensor, int src,
                            int tag) {
  check_host_tensor(send_tensor, "sendrecv");
  check_host_tensor(recv_tensor, "sendrecv");
  sendrecv(send_tensor.data(), send_tensor.numel(), dst, recv_tensor.data(), recv_tensor.numel(),
           src, tag);
}

void Communicator::all_reduce(Tensor tensor, ReduceOp op) {
  check_host_tensor(tensor, "all_reduce");
  all_reduce(tensor.data(), tensor.numel(), op);
}

void Communicator::reduce_scatter(const Tensor& input, Tensor output, ReduceOp op) {
  check_host_tensor(input, "reduce_scatter");
  check_host_tensor(output, "reduce_scatter");
  DPT_CHECK(input.numel() == output.numel() * size_,
            "reduce_scatter: input has " << input.numel() << " elements, expected size() x output = "
                                         << size_ << " x " << output.numel());
  reduce_scatter(input.data(), output.data(), output.numel(), op);
}

void Communicator::all_gather(const Tensor& input, Tensor output) {
  check_host_tensor(input, "all_gather");
  check_host_tensor(output, "all_gather");
  DPT_CHECK(output.numel() == input.numel() * size_,
            "all_gather: output has " << output.numel() << " elements, expected size() x input = "
                                      << size_ << " x " << input.numel());
  all_gather(input.data(), output.data(), input.numel());
}

void Communicator::broadcast(Tensor tensor, int root) {
  check_host_tensor(tensor, "broadcast");
  broadcast(tensor.data(), tensor.numel(), root);
}

std::shared_ptr<Work> Communicator::all_reduce_async(Tensor tensor, ReduceOp op) {
  check_host_tensor(tensor, "all_reduce_async");
  float* data = tensor.data();
  int64_t count = tensor.numel();
  // The job holds a handle on the tensor, so its storage outlives the call.
  return async([this, tensor, data, count, op] { all_reduce(data, count, op); });
}

}  // namespace dpt
