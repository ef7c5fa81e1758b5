/// @file bucket_engine.h
/// @brief Chapter 05's engine (provided, not a hole; private to
/// bucketed_sync.h, through which chapter 05's loop and chapter 14 use it): everything one rank's step touches from two threads. The rank thread
/// runs backward, whose grad-ready hooks call on_ready → your mark_ready →
/// launch (pack bucket b, queue its ring); the rank's progress thread runs
/// all_reduce_bucket (chapter 04's ring over the bucket). Beside that it keeps
/// the step's record, independent of your holes, from which summarise()
/// computes a BucketStep.
///
/// bucket_engine.cpp: the hooks, the launch and the ring job;
/// step_record.cpp: the record read back as times and counts (and, on a GPU,
/// the CUDA-event clock); bucketed_sync.cpp: set up on a parameter list and
/// driven through a step.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/gpu.h"
#include "dpt/trace.h"

namespace dpt::ch05 {

/// The host clock every interval of the record is read from.
using Clock = std::chrono::steady_clock;
/// b − a in seconds.
inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// One rank's bucketed step, shared by its rank thread and its progress
/// thread. Held by shared_ptr so that queued all-reduces keep it alive even if
/// the step throws; for the same reason it keeps its own copy of the rank's
/// Context (whose members refer to the communicator, device and tracer, which
/// outlive the rank's work): when the rank's function throws, launch() drops
/// the Context it was given and only then lets the still-queued all-reduces
/// fail against the stopped world.
struct BucketEngine : std::enable_shared_from_this<BucketEngine> {
  Context ctx;                     ///< the rank's own copy (see above)
  std::vector<Tensor> params;      ///< the replica's parameters, registration order
  std::vector<std::string> names;  ///< parameter → its name, for the trace
  int64_t step = 0;                ///< the step in progress
  BucketState state;               ///< the buckets: layout, what is ready, what is launched (ch05.h)
  bool syncing = false;  ///< true during the backward whose gradients are final for this step
  bool overlap = true;             ///< all-reduce during backward (--no-overlap: after it)
  std::vector<int> deferred;  ///< --no-overlap: ready parameters, replayed after backward
  int gpu = -1;                              ///< the rank's GPU, -1 on host memory
  std::unique_ptr<gpu::Stream> comm_stream;  ///< on a GPU: where the rings run
  /// On a GPU: the record's intervals as events on `gpu` (made once, recorded
  /// again every step; see step_record.cpp).
  struct GpuClock {
    gpu::Event anchor;                        ///< compute stream, before the step's first forward
    gpu::Event backward_start;  ///< compute stream, before the syncing backward
    gpu::Event backward_end;    ///< compute stream, after it
    std::vector<std::unique_ptr<gpu::Event>> ring_start;  ///< bucket → comm stream, before its ring
    std::vector<std::unique_ptr<gpu::Event>> ring_end;    ///< bucket → comm stream, after it
  };
  std::unique_ptr<GpuClock> clock;  ///< on a GPU; null on host memory
  Clock::time_point anchor_reached;  ///< with --trace on a GPU: when the host saw the anchor reached
  // The record (written by the rank thread, except comm_* by the progress
  // thread; read after wait(), which orders the two).
  std::vector<bool> seen_ready;             ///< parameter → its hook fired this step
  Clock::time_point last_ready;             ///< when the last gradient became ready
  std::vector<Clock::time_point> launched;  ///< bucket → launch time
  std::vector<Clock::time_point> comm_start;  ///< bucket → its all-reduce's start, progress thread's clock
  std::vector<Clock::time_point> comm_end;    ///< bucket → its all-reduce's end
  std::vector<int> order;                   ///< buckets in launch order
  int launched_unready = 0;  ///< buckets launched before every gradient in them was ready (must stay 0)
  int held_back = 0;         ///< hooks after which a bucket that could have launched still waited

  /// An engine for the rank `c`.
  explicit BucketEngine(const Context& c) : ctx(c) {}

  // ---- bucket_engine.cpp: the two threads' work ----
  /// On a GPU (device >= 0): the communication stream and the clock's events, made on it.
  void use_gpu(int device, std::size_t buckets);
  /// On a GPU: `event` marks the end of the rank thread's compute stream so far.
  void mark_compute(gpu::Event& event) const;
  /// Before a step: a fresh BucketState and an empty record.
  void reset();
  /// The hook on parameter p (or, with --find-unused-parameters, the forward
  /// not reaching it): record, then your mark_ready (now or, without overlap,
  /// after backward).
  void on_ready(int p, bool unused = false);
  /// Every gradient of bucket b has been ready this step.
  bool complete(int b) const;
  /// After a hook: a bucket that could have launched had not (step_record.cpp).
  bool waited_too_long() const;
  /// state.launch: pack bucket b, queue its ring all-reduce.
  void launch(int b);
  /// On a GPU: an event after the pack on the compute stream, which the
  /// communication stream will wait for. nullptr on host memory.
  std::shared_ptr<gpu::Event> record_packed();
  /// On the progress thread: chapter 04's ring, averaging bucket b.
  void all_reduce_bucket(int b, int64_t in_step, const gpu::Event* packed);

  // ---- step_record.cpp: the record read back ----
  /// What this step's record says (after wait_and_unpack; on a GPU also after
  /// the compute stream has reached backward_end).
  BucketStep summarise(Clock::time_point bw_start, Clock::time_point bw_end) const;
  /// backward_s, comm_s, hidden_s from the CUDA events, on the GPU's clock.
  void time_on_gpu(BucketStep& s) const;
  /// With --trace: a GPU interval, seconds after the anchor, on the host clock.
  void trace_gpu(const std::string& name, const char* category, Tracer::GpuStream stream, double from, double to,
                 std::initializer_list<TraceArg> args) const;
};

}  // namespace dpt::ch05
