// prefetch.cpp — jobs ahead of their use: the progress thread runs them; on a
// GPU they run on a stream of their own, ordered after the rank's stream at
// start, and the blocks they filled retire only after the rank's last read.
#include "dpt/prefetch.h"

#include "dpt/check.h"
#include "dpt/gpu.h"

namespace dpt {

struct Prefetch::Impl {
  Communicator& comm;
  Device& device;
  std::vector<std::shared_ptr<Work>> jobs;  // slot → its job in flight
  std::vector<char> finished;               // slot → a job finished, not yet taken
  std::unique_ptr<gpu::Stream> stream;      // on a GPU: where the jobs' work runs
  struct Retiring {                         // a block of the job stream's, and the
    Tensor block;                           // rank stream's point after its last read
    std::shared_ptr<gpu::Event> read;
  };
  std::vector<Retiring> retiring;

  bool on_gpu() const { return !device.is_host_memory(); }
};

Prefetch::Prefetch(Communicator& comm, Device& device, int slots)
    : impl_(new Impl{comm, device, std::vector<std::shared_ptr<Work>>(std::size_t(slots)),
                     std::vector<char>(std::size_t(slots), 0), nullptr, {}}) {}

Prefetch::~Prefetch() {
  for (auto& job : impl_->jobs) {
    try {
      if (job) job->wait();
    } catch (const std::exception&) {  // a peer failed while we were already unwinding
    }
  }
  try {
    if (impl_->stream) {
      retire();
      impl_->stream->synchronize();  // its waits too, before it is destroyed
    }
  } catch (const std::exception&) {
  }
}

void Prefetch::start(int slot, std::function<void()> job) {
  Impl& s = *impl_;
  DPT_CHECK(slot >= 0 && slot < int(s.jobs.size()) && !s.jobs[std::size_t(slot)],
            "Prefetch: slot " << slot << " is out of range or has a job in flight already");
  if (!s.on_gpu()) {
    s.jobs[std::size_t(slot)] = s.comm.async(std::move(job));
    return;
  }
  // The job's stream waits for the rank's work so far (the writes it reads),
  // so it overlaps whatever the rank queues next. It finishes its own work
  // before it completes: wait() then means "done on the GPU too".
  const int gpu = s.device.index();
  gpu::set_current_device(gpu);
  if (!s.stream) s.stream = std::make_unique<gpu::Stream>(gpu);
  auto ready = std::make_shared<gpu::Event>();
  ready->record(gpu::current_stream(gpu));
  gpu::Stream* stream = s.stream.get();
  s.jobs[std::size_t(slot)] = s.comm.async([stream, gpu, ready, job = std::move(job)] {
    gpu::set_current_device(gpu);
    stream->wait(*ready);
    gpu::StreamGuard guard(*stream);
    try {
      job();
    } catch (...) {
      try {
        stream->synchronize();  // nothing of it may still write once the error is out
      } catch (const std::exception&) {  // a GPU in error: the job's own error is the one to tell
      }
      throw;
    }
    stream->synchronize();
  });
}

void Prefetch::wait(int slot) {
  Impl& s = *impl_;
  if (slot < 0 || slot >= int(s.jobs.size()) || !s.jobs[std::size_t(slot)]) return;
  std::shared_ptr<Work> job = std::move(s.jobs[std::size_t(slot)]);
  s.jobs[std::size_t(slot)].reset();
  job->wait();
  s.finished[std::size_t(slot)] = 1;
}

bool Prefetch::take(int slot) {
  wait(slot);
  if (slot < 0 || slot >= int(impl_->finished.size()) || !impl_->finished[std::size_t(slot)]) return false;
  impl_->finished[std::size_t(slot)] = 0;
  return true;
}

void Prefetch::used(const Tensor& block) {
  Impl& s = *impl_;
  if (!s.stream || !block.defined()) return;
  // The next job may take this block from its stream's cache while the rank's
  // stream still reads it: it goes back only at retire(), once the job stream
  // has been made to wait for this point.
  gpu::set_current_device(s.device.index());
  auto read = std::make_shared<gpu::Event>();
  read->record(gpu::current_stream(s.device.index()));
  s.retiring.push_back({block, read});
}

void Prefetch::retire() {
  Impl& s = *impl_;
  for (const Impl::Retiring& r : s.retiring) s.stream->wait(*r.read);
  s.retiring.clear();  // the blocks go back to the job stream's cache
}

}  // namespace dpt
