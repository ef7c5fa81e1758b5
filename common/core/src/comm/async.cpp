// async.cpp — async work: Work handles and the per-rank progress thread that
// runs jobs in issue order. Left out: cancellation, priorities.
#include "comm/async_queue.h"

#include "dpt/check.h"
#include "dpt/span.h"

namespace dpt {

Work::~Work() = default;

namespace detail {

// A job's handle: done once the progress thread has run it; keeps its error
// until someone wait()s, or synchronize() rethrows it.
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

std::shared_ptr<Work> AsyncQueue::run_now(const std::function<void()>& op) {
  auto work = std::make_shared<QueuedWork>();
  try {
    op();
    work->complete(nullptr);
  } catch (...) {
    work->complete(std::current_exception());
  }
  return work;
}

AsyncQueue::~AsyncQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
    wake_.notify_all();
  }
  thread_.join();  // the thread drains queued jobs before it exits
}

std::shared_ptr<Work> AsyncQueue::submit(std::function<void()> op) {
  auto work = std::make_shared<QueuedWork>();
  std::lock_guard<std::mutex> lock(mutex_);
  DPT_CHECK(!stop_, "async work issued on a communicator that is shutting down");
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
    thread_id_ = thread_.get_id();
  }
  jobs_.emplace_back(std::move(op), work);
  wake_.notify_all();
  return work;
}

void AsyncQueue::loop() {
  set_error_rank(rank_);
  SpanRecorder::set_thread_lane(1);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) break;  // stop requested and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
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
    running_ = false;
    if (error) failed_.push_back(job.second);
    if (jobs_.empty()) idle_.notify_all();
  }
}

void AsyncQueue::synchronize() {
  std::vector<std::shared_ptr<QueuedWork>> failed;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (std::this_thread::get_id() == thread_id_) return;  // called from a job
    idle_.wait(lock, [&] { return !running_ && jobs_.empty(); });
    failed.swap(failed_);
  }
  for (auto& work : failed)
    if (auto error = work->take_unobserved_error()) std::rethrow_exception(error);
}

bool AsyncQueue::must_queue() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::this_thread::get_id() != thread_id_ && (running_ || !jobs_.empty());
}

}  // namespace detail
}  // namespace dpt
