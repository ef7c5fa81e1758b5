// cuda_emulator.cpp — runs a launch, block after block, with one execution
// context per CUDA thread of a block: they meet at each __syncthreads() and at
// the end of the block, and a barrier where not all of them arrived at the same
// place fails the launch.
//
// Two engines, one behaviour:
// - fibers (ucontext): every CUDA thread a fiber on the launching thread,
//   switched at barriers in thread order. Deterministic and fast (a switch is a
//   function call and a signal-mask syscall, not a trip through the kernel's
//   scheduler);
// - threads (std::thread and a condition variable), under AddressSanitizer
//   and ThreadSanitizer, which do not follow stack switches unannotated: there
//   a shared-memory access a missing __syncthreads() leaves unordered is a
//   reported race. Slow (each barrier wakes every thread), so the tests keep
//   their sizes small under them (kFast in the header).
#include "support/cuda_emulator.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#if DPT_EMULATOR_FIBERS
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#endif

namespace dpt_test::emulator {

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace {

std::string str(const uint3& i) {
  std::ostringstream s;
  s << '(' << i.x << ", " << i.y << ", " << i.z << ')';
  return s.str();
}

// Where a thread waits: a __syncthreads() (file, line) or the end of its
// block (file null).
struct Site {
  const char* file = nullptr;
  int line = 0;
  bool operator==(const Site& o) const { return line == o.line && std::string(file ? file : "") == (o.file ? o.file : ""); }
  std::string str() const {
    return file ? "__syncthreads() at " + std::string(file) + ":" + std::to_string(line) : "the end of the kernel";
  }
};

// Whether this thread runs a kernel now (every fiber runs on the launching
// thread; a threads engine worker marks itself).
thread_local bool t_in_kernel = false;
struct InKernel {
  InKernel() { t_in_kernel = true; }
  ~InKernel() { t_in_kernel = false; }
};

std::string mismatch(const uint3& thread, const Site& site, const uint3& other, const Site& other_site) {
  return "block " + str(blockIdx) + ": thread " + str(thread) + " reached " + site.str() + " while thread " +
         str(other) + " waits at " + other_site.str() +
         ": every thread of a block must reach the same barriers (on a GPU this is undefined behaviour)";
}
std::string threw(const char* what) {
  return "block " + str(blockIdx) + ", thread " + str(threadIdx) + " threw: " + what;
}

void check_configuration(dim3 grid, dim3 block) {
  std::ostringstream why;
  std::uint64_t threads = std::uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0)
    why << "an empty grid or block";
  else if (threads > 1024 || block.z > 64)
    why << threads << " threads a block (at most 1024, and block.z at most 64)";
  else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    why << "a grid beyond 2147483647 × 65535 × 65535 blocks";
  if (why.tellp() > 0) {
    throw std::invalid_argument("emulated launch of grid " + str({grid.x, grid.y, grid.z}) + " × block " +
                                str({block.x, block.y, block.z}) + ": " + why.str() +
                                " (CUDA refuses it: invalid configuration argument)");
  }
}

#if DPT_EMULATOR_FIBERS
// ----------------------------------------------------------------------------
// fibers

constexpr std::size_t kStackBytes = 256 * 1024;  // a kernel's frames are small; untouched pages cost nothing

// A fiber's stack, mapped with an inaccessible page below it: an overflow
// is a segmentation fault at once, not a heap silently overwritten.
class Stack {
 public:
  Stack() {
    const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
    bytes_ = kStackBytes + page;
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) throw std::runtime_error("emulator: could not map a fiber's stack");
    mprotect(base_, page, PROT_NONE);  // the guard (stacks grow down)
    top_ = static_cast<char*>(base_) + page;
  }
  ~Stack() { munmap(base_, bytes_); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  void* bottom() const { return top_; }

 private:
  void* base_;
  char* top_;
  std::size_t bytes_;
};

struct Fiber {
  ucontext_t context;
  Stack stack;
  uint3 index;
  Site site;  // where it waits
};

// The launch in progress.
struct Launching {
  ucontext_t scheduler;
  std::vector<std::unique_ptr<Fiber>> fibers;  // grown, never shrunk: stacks are reused
  Fiber* current = nullptr;
  std::size_t current_index = 0;  // current's place in fibers
  std::size_t count = 0;          // fibers in this launch's blocks
  bool descending = false;        // this round's order: odd rounds run the threads last to first
  const std::function<void()>* thread = nullptr;
  std::string error;
};
Launching& launching() {
  static Launching l;
  return l;
}

// Waits at `site`: on to the round's next thread, or, from its last one,
// back to the scheduler (one switch a thread a round, not two); returns when
// the block goes on. Rounds alternate their order, so a read that a missing
// barrier leaves unordered sees the old value in one round or the other.
void park(const Site& site) {
  Launching& l = launching();
  Fiber* self = l.current;
  self->site = site;
  if (l.current_index == (l.descending ? 0 : l.count - 1)) {
    swapcontext(&self->context, &l.scheduler);
    return;
  }
  l.current_index = l.descending ? l.current_index - 1 : l.current_index + 1;
  l.current = l.fibers[l.current_index].get();
  threadIdx = l.current->index;
  swapcontext(&self->context, &l.current->context);
}

// A fiber's life: the kernel for one block, then the end-of-block barrier,
// again for the next block, until the scheduler stops resuming it.
void fiber_main() {
  Launching& l = launching();
  for (;;) {
    try {
      (*l.thread)();
    } catch (const std::exception& e) {
      if (l.error.empty()) l.error = threw(e.what());
    } catch (...) {
      if (l.error.empty()) l.error = threw("an exception that is not a std::exception");
    }
    park(Site{});
  }
}

// A fresh context for f that enters fiber_main on its own stack.
void start(Fiber& f) {
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack.bottom();
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;  // fiber_main never returns
  makecontext(&f.context, fiber_main, 0);
}

void run_on_fibers(dim3 grid, dim3 block, const std::function<void()>& thread) {
  Launching& l = launching();
  const std::size_t count = std::size_t(block.x) * block.y * block.z;
  while (l.fibers.size() < count) l.fibers.push_back(std::make_unique<Fiber>());
  l.thread = &thread, l.error.clear(), l.count = count;
  blockDim = block, gridDim = grid;
  std::size_t i = 0;
  for (unsigned z = 0; z < block.z; ++z)
    for (unsigned y = 0; y < block.y; ++y)
      for (unsigned x = 0; x < block.x; ++x) {
        l.fibers[i]->index = {x, y, z};
        start(*l.fibers[i++]);
      }
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        l.descending = false;
        for (;; l.descending = !l.descending) {  // one round: every thread runs to its next barrier
          l.current_index = l.descending ? count - 1 : 0;
          l.current = l.fibers[l.current_index].get();
          threadIdx = l.current->index;
          swapcontext(&l.scheduler, &l.current->context);
          l.current = nullptr;
          // On a failure the fibers are left where they are, mid-kernel, and
          // never resumed: their frames hold nothing to destroy (kernels keep
          // plain values), and the next launch starts them afresh.
          if (!l.error.empty()) throw std::runtime_error("emulated launch: " + l.error);
          const Fiber& first = *l.fibers[0];
          for (std::size_t t = 1; t < count; ++t)
            if (!(l.fibers[t]->site == first.site))
              throw std::runtime_error("emulated launch: " + mismatch(l.fibers[t]->index, l.fibers[t]->site,
                                                                       first.index, first.site));
          if (!first.site.file) break;  // all at the end of the kernel: the next block
        }
      }
}
#endif

// ----------------------------------------------------------------------------
// threads

// The barrier of one block's threads. Once the launch failed (threads at
// different sites, or a thread threw) it no longer waits: each thread's next
// __syncthreads() unwinds its kernel (Abandoned), its next end of block ends
// it, and run() reports the first failure.
class Barrier {
 public:
  explicit Barrier(int threads) : threads_(threads) {}

  // False once the launch has failed.
  bool arrive(const Site& site) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!error_.empty()) return false;
    if (arrived_ == 0) {
      site_ = site, first_ = threadIdx;
    } else if (!(site == site_)) {
      fail_locked(mismatch(threadIdx, site, first_, site_));
      return false;
    }
    std::uint64_t generation = generation_;
    if (++arrived_ == threads_) {
      arrived_ = 0, ++generation_;
      released_.notify_all();
      return true;
    }
    released_.wait(lock, [&] { return generation_ != generation || !error_.empty(); });
    return error_.empty();
  }
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_locked(why);
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  void fail_locked(const std::string& why) {
    if (error_.empty()) error_ = why;
    released_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable released_;
  const int threads_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  Site site_;
  uint3 first_;
  std::string error_;
};

// The barrier of the block this thread belongs to, during a launch.
[[maybe_unused]] thread_local Barrier* t_barrier = nullptr;

// Thrown from __syncthreads() once the launch has failed: unwinds the
// thread's kernel, so no thread runs on past a barrier the others never met
// (it would race with them on shared memory).
struct Abandoned {};

[[maybe_unused]] void run_on_threads(dim3 grid, dim3 block, const std::function<void()>& thread) {
  const int count = int(block.x * block.y * block.z);
  Barrier barrier(count);
  auto work = [&](uint3 index) {
    InKernel in_kernel;
    threadIdx = index, blockDim = block, gridDim = grid, t_barrier = &barrier;
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          blockIdx = {x, y, z};
          try {
            thread();
          } catch (const Abandoned&) {  // the launch failed at a barrier: this thread's kernel is unwound
            t_barrier = nullptr;
            return;
          } catch (const std::exception& e) {
            barrier.fail(threw(e.what()));
          } catch (...) {
            barrier.fail(threw("an exception that is not a std::exception"));
          }
          if (!barrier.arrive(Site{})) {
            t_barrier = nullptr;
            return;
          }
        }
    t_barrier = nullptr;
  };
  std::vector<std::thread> threads;
  threads.reserve(std::size_t(count));
  try {
    for (unsigned z = 0; z < block.z; ++z)
      for (unsigned y = 0; y < block.y; ++y)
        for (unsigned x = 0; x < block.x; ++x) threads.emplace_back(work, uint3{x, y, z});
  } catch (const std::exception& e) {  // the threads started would wait for the missing ones
    barrier.fail("could not start thread " + std::to_string(threads.size()) + " of " + std::to_string(count) + ": " +
                 e.what());
  }
  for (std::thread& t : threads) t.join();
  std::string error = barrier.error();
  if (!error.empty()) throw std::runtime_error("emulated launch: " + error);
}

}  // namespace

void syncthreads(const char* file, int line) {
#if DPT_EMULATOR_FIBERS
  if (!launching().current) throw std::logic_error("__syncthreads() outside an emulated launch");
  park(Site{file, line});
#else
  if (!t_barrier) throw std::logic_error("__syncthreads() outside an emulated launch");
  if (!t_barrier->arrive(Site{file, line})) throw Abandoned{};
#endif
}

std::vector<LaunchRecord>& launches() {
  static std::vector<LaunchRecord> all;
  return all;
}

void run(dim3 grid, dim3 block, const std::function<void()>& thread) {
  // A launch from a kernel (CUDA's dynamic parallelism) would wait for itself.
  if (t_in_kernel) throw std::logic_error("emulated launch from inside a kernel: dynamic parallelism is not emulated");
  static std::mutex one_at_a_time;  // __shared__ arrays are statics: one launch at a time in a process
  std::lock_guard<std::mutex> one(one_at_a_time);
  check_configuration(grid, block);
  launches().push_back({grid, block});
  InKernel in_kernel;
#if DPT_EMULATOR_FIBERS
  run_on_fibers(grid, block, thread);
#else
  run_on_threads(grid, block, thread);
#endif
}

}  // namespace dpt_test::emulator
