// cuda_standin_streams.cpp — the CUDA runtime stand-in's streams, events,
// copies, capture and graphs (the model: cuda_standin/standin.h).
#include <algorithm>
#include <cstring>

#include "support/cuda_standin/state.h"

namespace dpt_test::standin {

namespace {
bool ready(const Op& op) { return !op.after || op.after->reached >= op.point; }

// Refuses a call a capture cannot record: the capture is invalidated, as CUDA does.
cudaError_t refuse_in_capture(CUstream_st* stream) {
  stream->capture = cudaStreamCaptureStatusInvalidated;
  ++state().counts.refused_in_capture;
  return failed(cudaErrorStreamCaptureUnsupported);
}

// Queues an op that may run once `event`'s latest recorded point is reached.
void queue_wait(CUstream_st* stream, const std::shared_ptr<EventState>& event) {
  if (event->recorded == 0) return;  // never recorded: nothing to wait for
  Op op{[] {}, event, event->recorded};
  if (stream->recording) stream->recording->nodes.push_back(op);
  else stream->queue.push_back(op);
  run_ready();
}

// A plain copy: `device` is the stream's GPU; pool memory of another GPU
// needs peer access, which the stand-in does not grant.
cudaError_t check_range(const void* ptr, std::size_t bytes, int device, bool& on_device) {
  Block* block = block_holding(ptr);
  on_device = block != nullptr;
  if (!block) return cudaSuccess;
  auto at = static_cast<const unsigned char*>(ptr);
  if (at + bytes > block->bytes.get() + block->size) return failed(cudaErrorInvalidValue);
  if (block->pool && block->device != device) return failed(cudaErrorInvalidValue);
  return cudaSuccess;
}
}  // namespace

void run_ready() {
  for (bool progress = true; progress;) {
    progress = false;
    for (CUstream_st* stream : state().streams)
      while (!stream->held && !stream->queue.empty() && ready(stream->queue.front())) {
        Op op = std::move(stream->queue.front());
        stream->queue.pop_front();
        ++state().clock;
        op.run();
        progress = true;
      }
  }
}

void finish_all() {
  for (CUstream_st* stream : state().streams) stream->held = false;
  run_ready();
  release_idle_above_threshold();
}

void queue(CUstream_st* stream, std::function<void()> work) {
  if (stream->recording) {
    stream->recording->nodes.push_back(Op{std::move(work), nullptr, 0});
    return;
  }
  stream->queue.push_back(Op{std::move(work), nullptr, 0});
  run_ready();
}

bool capture_forbids_unsafe_calls() {
  for (CUstream_st* stream : state().streams)
    if (stream->capture == cudaStreamCaptureStatusActive && stream->mode != cudaStreamCaptureModeRelaxed &&
        (stream->mode == cudaStreamCaptureModeGlobal || stream->capturer == std::this_thread::get_id()))
      return true;
  return false;
}

void hold(void* stream) {
  Lock lock(state().mutex);
  static_cast<CUstream_st*>(stream)->held = true;
}

void release(void* stream) {
  Lock lock(state().mutex);
  static_cast<CUstream_st*>(stream)->held = false;
  run_ready();
}

void enqueue(void* stream, std::function<void()> work) {
  Lock lock(state().mutex);
  queue(static_cast<CUstream_st*>(stream), std::move(work));
}

std::size_t pending(void* stream) {
  Lock lock(state().mutex);
  return static_cast<CUstream_st*>(stream)->queue.size();
}

}  // namespace dpt_test::standin

using namespace dpt_test::standin;

// ---- streams and events -----------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *stream = new CUstream_st;
  (*stream)->device = t_device;
  state().streams.insert(*stream);
  ++state().handles;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  stream->held = false;  // CUDA lets queued work finish after the destroy returns
  run_ready();
  if (!stream->queue.empty()) return failed(cudaErrorIllegalState);  // waits on work that never comes
  delete stream->recording;
  state().streams.erase(stream);
  delete stream;
  --state().handles;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (stream->capture != cudaStreamCaptureStatusNone) return refuse_in_capture(stream);
  finish_all();
  if (!stream->queue.empty()) return failed(cudaErrorIllegalState);
  ++state().counts.synchronizes;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  return stream->queue.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  queue_wait(stream, event->state);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *event = new CUevent_st;
  (*event)->device = t_device;
  (*event)->timing = !(flags & cudaEventDisableTiming);
  ++state().handles;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  delete event;  // a queued wait keeps the event's state
  --state().handles;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (event->device != stream->device) return failed(cudaErrorInvalidResourceHandle);  // CUDA's rule
  std::shared_ptr<EventState> at = event->state;
  std::uint64_t point = ++at->recorded;
  queue(stream, [at, point] {
    at->reached = std::max(at->reached, point);
    at->time = state().clock;
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  finish_all();
  if (event->state->reached < event->state->recorded) return failed(cudaErrorIllegalState);
  ++state().counts.synchronizes;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (!start->timing || !end->timing) return failed(cudaErrorInvalidResourceHandle);
  if (!start->state->reached || !end->state->reached) return failed(cudaErrorNotReady);
  *ms = float(end->state->time) - float(start->state->time);  // one "millisecond" per piece of work
  return cudaSuccess;
}

// ---- copies -------------------------------------------------------------------------

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (kind != cudaMemcpyDefault) return failed(cudaErrorNotSupported);  // not modelled
  bool dst_device = false, src_device = false;
  if (cudaError_t e = check_range(dst, bytes, stream->device, dst_device)) return e;
  if (cudaError_t e = check_range(src, bytes, stream->device, src_device)) return e;
  if (stream->capture == cudaStreamCaptureStatusActive && !(dst_device && src_device))
    return refuse_in_capture(stream);  // pageable host memory cannot be captured
  queue(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
                                cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  Block* to = block_holding(dst);
  Block* from = block_holding(src);
  if (!to || !from || to->device != dst_device || from->device != src_device) return failed(cudaErrorInvalidValue);
  if (static_cast<unsigned char*>(dst) + bytes > to->bytes.get() + to->size ||
      static_cast<const unsigned char*>(src) + bytes > from->bytes.get() + from->size)
    return failed(cudaErrorInvalidValue);
  queue(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

// ---- capture and graphs ---------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (stream->capture != cudaStreamCaptureStatusNone) return failed(cudaErrorIllegalState);
  stream->capture = cudaStreamCaptureStatusActive;
  stream->mode = mode;
  stream->capturer = std::this_thread::get_id();
  stream->recording = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (stream->capture == cudaStreamCaptureStatusNone) return failed(cudaErrorIllegalState);
  bool invalidated = stream->capture == cudaStreamCaptureStatusInvalidated;
  CUgraph_st* recording = stream->recording;
  stream->capture = cudaStreamCaptureStatusNone;
  stream->recording = nullptr;
  if (invalidated) {
    for (void* ptr : recording->owned) give_to_pool(ptr);
    delete recording;
    *graph = nullptr;
    return failed(cudaErrorStreamCaptureInvalidated);
  }
  *graph = recording;
  ++state().handles;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *status = stream->capture;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *exec = new CUgraphExec_st{graph->nodes};
  ++state().handles;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  for (const Op& op : exec->nodes) {
    if (stream->recording) stream->recording->nodes.push_back(op);
    else stream->queue.push_back(op);
  }
  run_ready();
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, std::size_t* count) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (nodes) return failed(cudaErrorNotSupported);  // only the count is modelled
  *count = graph->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  for (void* ptr : graph->owned) {  // the graph's own scratch: back to the pool
    Block* block = block_holding(ptr);
    if (block) give_to_pool(ptr);
  }
  delete graph;
  --state().handles;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  delete exec;
  --state().handles;
  return cudaSuccess;
}
