// async_queue.h — one rank's progress thread: runs async work in issue order
// (see dpt/comm/async.h). Private to libdpt; used by communicator.cpp.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dpt/comm/async.h"

namespace dpt {
namespace detail {

class QueuedWork;

/// A rank's progress thread, started on first use and joined (after draining
/// what was queued) by the destructor.
class AsyncQueue {
 public:
  /// For rank `rank` (its thread labels errors and trace lanes with it).
  explicit AsyncQueue(int rank) : rank_(rank) {}
  ~AsyncQueue();
  /// Queues `op` behind earlier work and returns its handle at once.
  std::shared_ptr<Work> submit(std::function<void()> op);
  /// Runs `op` now on this thread (for backends that are not thread-safe).
  static std::shared_ptr<Work> run_now(const std::function<void()>& op);
  /// Waits until the queue is empty; rethrows the first error nobody waited for.
  void synchronize();
  /// True when called off the progress thread while work is pending: a
  /// blocking call must then queue behind it to keep issue order.
  bool must_queue();

 private:
  void loop();

  const int rank_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a job was queued, or stop
  std::condition_variable idle_;  // the queue ran dry
  std::deque<std::pair<std::function<void()>, std::shared_ptr<QueuedWork>>> jobs_;
  bool running_ = false;  // a job is executing on the thread
  bool stop_ = false;
  std::thread thread_;
  std::thread::id thread_id_;
  std::vector<std::shared_ptr<QueuedWork>> failed_;
};

}  // namespace detail
}  // namespace dpt
