// trace.cpp — spans, per-category seconds, and the Chrome Trace Event file.
//
// Format reference: "Trace Event Format" (Google, docs.google.com/document/d/
// 1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). We emit complete events
// ("ph":"X", ts and dur in microseconds), instants ("ph":"i", thread scope),
// counters ("ph":"C"), and metadata
// ("ph":"M") naming each track.
#include "dpt/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "dpt/check.h"
#include "comm/backend.h"
#include "dpt/comm.h"
#include "dpt/output_file.h"

namespace dpt {

namespace {
// Spans open on this thread, innermost last: (tracer, category). Used to count
// a category's time once when spans of that category nest.
struct OpenSpan {
  const Tracer* tracer;
  int category;
};
thread_local std::vector<OpenSpan> t_open;

// Lanes: 0 the rank's thread, 1 its progress thread, 2 and 3 its GPU's
// compute and comm streams (gpu_span).
constexpr int kLanes = 4;
int tid_of(int rank, int lane) { return 1000 * lane + rank; }
const char* lane_suffix(int lane) {
  static const char* const suffixes[kLanes] = {"", " async", " GPU compute stream", " GPU comm stream"};
  return suffixes[lane];
}

double micros(TraceClock::duration d) {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) / 1000.0;
}
}  // namespace

struct Tracer::Event {
  char phase;  // 'X' complete span, 'i' instant, 'C' counter
  std::string name, category;
  TraceClock::duration ts{}, dur{-1};  // since origin; dur -1: still open
  int lane = 0;
  std::vector<std::pair<std::string, double>> args;
};

// ----------------------------------------------------------------------------
// spans

SpanState Tracer::begin_span(std::string_view name, std::string_view category,
                             std::initializer_list<TraceArg> args) {
  SpanState state;
  state.category = category_index(category);
  state.counts = true;
  for (const OpenSpan& open : t_open)
    if (open.tracer == this && open.category == state.category) state.counts = false;
  t_open.push_back({this, state.category});
  state.start = TraceClock::now();
  if (enabled_ || storing_) state.event = start_event(name, category, args, state.start);
  return state;
}

void Tracer::end_span(const SpanState& state) {
  TraceClock::time_point now = TraceClock::now();
  for (std::size_t i = t_open.size(); i-- > 0;) {
    if (t_open[i].tracer == this && t_open[i].category == state.category) {
      t_open.erase(t_open.begin() + i);
      break;
    }
  }
  end_event(state.event, state.category, state.counts, state.start, now);
}

// ----------------------------------------------------------------------------
// the tracer

Tracer::Tracer(int rank, bool enabled, TraceClock::time_point origin)
    : rank_(rank), enabled_(enabled), origin_(origin) {}

Tracer::~Tracer() = default;

int Tracer::category_index(std::string_view category) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < categories_.size(); ++i)
    if (categories_[i] == category) return int(i);
  categories_.emplace_back(category);
  seconds_.push_back(0.0);
  return int(categories_.size()) - 1;
}

int Tracer::start_event(std::string_view name, std::string_view category,
                        std::initializer_list<TraceArg> args, TraceClock::time_point start) {
  Event e;
  e.phase = 'X';
  e.name = name;
  e.category = category;
  e.ts = start - origin_;
  e.lane = thread_lane();
  for (const TraceArg& a : args) e.args.emplace_back(a.key, a.value);
  std::lock_guard<std::mutex> lock(mutex_);
  used_lane_[e.lane] = true;
  events_.push_back(std::move(e));
  return int(events_.size()) - 1;
}

void Tracer::end_event(int event, int category, bool counts, TraceClock::time_point start,
                       TraceClock::time_point end) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (counts) seconds_[category] += std::chrono::duration<double>(end - start).count();
  if (event >= 0) events_[event].dur = end - start;
}

void Tracer::instant(std::string_view name, std::string_view category, std::initializer_list<TraceArg> args) {
  if (!enabled_) return;
  Event e;
  e.phase = 'i';
  e.name = name;
  e.category = category;
  e.ts = TraceClock::now() - origin_;
  e.lane = thread_lane();
  for (const TraceArg& a : args) e.args.emplace_back(a.key, a.value);
  std::lock_guard<std::mutex> lock(mutex_);
  used_lane_[e.lane] = true;
  events_.push_back(std::move(e));
}

void Tracer::gpu_span(std::string_view name, std::string_view category, GpuStream stream,
                      TraceClock::time_point start, TraceClock::time_point end,
                      std::initializer_list<TraceArg> args) {
  if (!enabled_) return;
  Event e;
  e.phase = 'X';
  e.name = name;
  e.category = category;
  e.ts = start - origin_;
  e.dur = std::max(end - start, TraceClock::duration::zero());  // a complete span, never "still open"
  e.lane = stream == GpuStream::Compute ? 2 : 3;
  for (const TraceArg& a : args) e.args.emplace_back(a.key, a.value);
  std::lock_guard<std::mutex> lock(mutex_);
  used_lane_[e.lane] = true;
  events_.push_back(std::move(e));
}

void Tracer::counter(std::string_view name, double value) {
  if (!enabled_) return;
  Event e;
  e.phase = 'C';
  e.name = name;
  e.ts = TraceClock::now() - origin_;
  e.lane = thread_lane();
  e.args.emplace_back("value", value);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(e));
}

double Tracer::seconds(std::string_view category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < categories_.size(); ++i)
    if (categories_[i] == category) return seconds_[i];
  return 0.0;
}

void Tracer::reset_seconds() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
}

std::vector<RecordedSpan> Tracer::spans_between(TraceClock::time_point from, TraceClock::time_point to) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RecordedSpan> out;
  for (const Event& e : events_) {
    if (e.phase != 'X' || e.dur.count() < 0 || e.ts < from - origin_ || e.ts + e.dur > to - origin_) continue;
    out.push_back({e.name, e.category, micros(e.ts) / 1e6, micros(e.ts + e.dur) / 1e6, e.lane});
  }
  std::stable_sort(out.begin(), out.end(), [](const RecordedSpan& a, const RecordedSpan& b) { return a.start < b.start; });
  return out;
}

std::size_t Tracer::event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

std::string Tracer::events_json() const {
  using nlohmann::json;
  std::lock_guard<std::mutex> lock(mutex_);
  json out = json::array();
  // Track names: the rank's own thread always (so every rank has a track),
  // its progress thread and GPU streams when they recorded something. Sort
  // index keeps them right under "rank R", in lane order.
  for (int lane = 0; lane < kLanes; ++lane) {
    if (lane > 0 && !used_lane_[lane]) continue;
    int tid = tid_of(rank_, lane);
    std::string label = "rank " + std::to_string(rank_) + lane_suffix(lane);
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid},
                   {"args", {{"name", label}}}});
    out.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 0}, {"tid", tid},
                   {"args", {{"sort_index", kLanes * rank_ + lane}}}});
  }
  for (const Event& e : events_) {
    if (e.phase == 'X' && e.dur.count() < 0) continue;  // still open
    json args = json::object();
    for (const auto& [key, value] : e.args) {
      if (std::abs(value) < 9e15 && value == double(int64_t(value))) args[key] = int64_t(value);
      else args[key] = value;
    }
    json event = {{"name", e.name}, {"ph", std::string(1, e.phase)}, {"ts", micros(e.ts)},
                  {"pid", 0}, {"tid", tid_of(rank_, e.lane)}, {"args", args}};
    if (e.phase == 'X') {
      event["cat"] = e.category;
      event["dur"] = micros(e.dur);
    } else if (e.phase == 'i') {
      event["cat"] = e.category;
      event["s"] = "t";  // a mark on this thread's track
    } else {  // counters are per process in the viewer: name them per rank
      event["name"] = e.name + " (rank " + std::to_string(rank_) + ")";
    }
    out.push_back(std::move(event));
  }
  return out.dump();
}

// ----------------------------------------------------------------------------
// writing the file

void write_chrome_trace(const std::string& path, const std::vector<std::string>& rank_events) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0},
                    {"args", {{"name", "dpt"}}}});
  for (std::size_t r = 0; r < rank_events.size(); ++r) {
    json part;
    try {
      part = json::parse(rank_events[r]);
    } catch (const json::exception& e) {
      DPT_FAIL("trace: the events of rank " << r << " are not valid JSON: " << e.what());
    }
    DPT_CHECK(part.is_array(), "trace: the events of rank " << r << " are not a JSON array");
    for (auto& event : part) events.push_back(std::move(event));
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};

  // A document: written beside the target and renamed, never over a link or a device.
  write_output_file(path, doc.dump() + "\n");
}

void gather_and_write_trace(Communicator& comm, const Tracer& tracer, const std::string& path) {
  // Two rounds, since all_gather_bytes moves equal sizes: every rank's length,
  // then every rank's text padded with spaces (valid JSON whitespace).
  std::string mine = tracer.events_json();
  int64_t length = int64_t(mine.size());
  std::vector<int64_t> lengths(comm.size());
  detail::CommAccess::all_gather_bytes(comm, &length, lengths.data(), sizeof(int64_t));
  int64_t longest = 0;
  for (int64_t l : lengths) longest = std::max(longest, l);
  mine.resize(longest, ' ');
  std::vector<char> all(std::size_t(longest) * comm.size());
  detail::CommAccess::all_gather_bytes(comm, mine.data(), all.data(), longest);
  if (comm.rank() != 0) return;
  std::vector<std::string> parts;
  for (int r = 0; r < comm.size(); ++r) parts.emplace_back(all.data() + r * longest, lengths[r]);
  write_chrome_trace(path, parts);
}

}  // namespace dpt
