/// @file span.h
/// @brief `SpanRecorder`: where core code reports how long its calls took
/// (a Communicator's send, all_reduce, …) without knowing who listens, and
/// `TraceSpan`, the scope that reports one call. The harness's `Tracer`
/// (trace.h) is the recorder launch() gives every Communicator; with none,
/// a span costs one branch.
///
///     TraceSpan span(recorder, "all_reduce", "comm", {{"bytes", 4.0 * count}});
///     backend.all_reduce(data, count, op);   // the span ends at the brace
///
/// Left out: what a recorder does with a span (timeline, seconds per
/// category): that is the recorder's business.
#pragma once

#include <chrono>
#include <initializer_list>
#include <string_view>

namespace dpt {

/// The clock of every timestamp.
using TraceClock = std::chrono::steady_clock;

/// One numeric argument shown with a span: {"bytes", 4096}. `key` must be a
/// string literal (or otherwise outlive the call).
struct TraceArg {
  const char* key;  ///< argument name, e.g. "bytes"
  double value;     ///< its value
};

/// What a recorder keeps about one open span until it ends; opaque to
/// everyone else.
struct SpanState {
  int category = -1;             ///< the recorder's index of the span's category
  bool counts = false;           ///< whether the span's time counts toward its category
  int event = -1;                ///< the recorder's index of the stored event, or -1
  TraceClock::time_point start;  ///< when the span began
};

/// Receives spans: one level of virtual dispatch, called on whichever thread
/// runs the span (a rank's thread or its progress thread).
class SpanRecorder {
 public:
  virtual ~SpanRecorder() = default;
  /// A span named `name` in `category` begins now on the calling thread.
  virtual SpanState begin_span(std::string_view name, std::string_view category,
                               std::initializer_list<TraceArg> args) = 0;
  /// The span begun with `state` ends now. Spans on one thread end in
  /// reverse order of beginning.
  virtual void end_span(const SpanState& state) = 0;

  /// Marks the calling thread's spans as lane 0 (a rank's own thread) or 1
  /// (its async progress thread). Communicator sets it on its progress thread.
  static void set_thread_lane(int lane);
  /// The calling thread's lane (0 unless set_thread_lane said otherwise).
  static int thread_lane();
};

/// RAII scope: one span from construction to end() or destruction.
class TraceSpan {
 public:
  /// Starts a span on `recorder` (null: an inert span that records nothing).
  TraceSpan(SpanRecorder* recorder, std::string_view name, std::string_view category,
            std::initializer_list<TraceArg> args = {})
      : recorder_(recorder) {
    if (recorder_) state_ = recorder_->begin_span(name, category, args);
  }
  ~TraceSpan() { end(); }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  /// Ends the span now (later calls do nothing).
  void end() {
    if (!recorder_) return;
    recorder_->end_span(state_);
    recorder_ = nullptr;
  }

 private:
  SpanRecorder* recorder_;
  SpanState state_;
};

}  // namespace dpt
