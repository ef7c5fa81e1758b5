// span.cpp — the calling thread's span lane (span.h); the rest is inline.
#include "dpt/span.h"

namespace dpt {

namespace {
thread_local int t_lane = 0;
}  // namespace

void SpanRecorder::set_thread_lane(int lane) { t_lane = lane == 0 ? 0 : 1; }

int SpanRecorder::thread_lane() { return t_lane; }

}  // namespace dpt
