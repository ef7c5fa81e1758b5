// link_clock.cpp — the simulated network of the threads backend (LinkModel,
// dpt/comm/link_model.h).
//
// Each rank has one full-duplex port onto a switch. A message of S bytes
// starts when the sender's out-port and the receiver's in-port are both free,
// holds both for S/beta, and arrives alpha later. So messages on one link
// queue behind each other, and so do messages converging on one rank (why a
// parameter server is slow). The sender returns when its message has left the
// port; the receiver returns at arrival (mailbox.cpp sleeps until then).
// Library collectives take at least the time of the matching
// bandwidth-optimal algorithm on this model (modelled_seconds).
//
// A simulated wait longer than the timeout is a Timeout, not a sleep: the
// model's time counts against --comm-timeout like a real network's.
//
// Left out: contention inside the switch, several ports per rank.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void sleep_until_precise(Clock::time_point when) {
  constexpr auto kSpin = std::chrono::microseconds(200);
  if (when - Clock::now() > kSpin) std::this_thread::sleep_until(when - kSpin);
  while (Clock::now() < when) std::this_thread::yield();
}

// Called without the mutex, after the message itself has been delivered.
void World::sleep_on_link(int me, Clock::time_point when, const char* call) const {
  Clock::duration wait = when - Clock::now();
  if (wait > timeout_) {
    char text[160];
    std::snprintf(text, sizeof text, "rank %d's %s would wait %.1f s on the simulated link, more than the "
                  "--comm-timeout of %.1f s", me, call, std::chrono::duration<double>(wait).count(), timeout_s_);
    throw Timeout(dpt::detail::format_error(__FILE__, __LINE__, std::string(text) + " (" + link_.describe() +
                  "): raise --link-gbps, lower --link-latency-us, or raise --comm-timeout"));
  }
  sleep_until_precise(when);
}

// Reserves the ports for `bytes` from src to dst (ranks here); returns
// {departure, arrival}. The ports are the world ranks': a sub-world's message
// queues behind the same rank's messages on any other communicator.
std::pair<Clock::time_point, Clock::time_point> World::reserve_link(int src, int dst, int64_t bytes) {
  std::lock_guard<std::mutex> lock(ports_->mutex);
  auto& out_free = ports_->out_free[world_rank(src)];
  auto& in_free = ports_->in_free[world_rank(dst)];
  Clock::time_point now = Clock::now();
  Clock::time_point start = std::max({now, out_free, in_free});
  Clock::time_point departure = start + to_duration(link_.transfer_seconds(bytes));
  out_free = in_free = departure;
  return {departure, departure + to_duration(link_.latency_us * 1e-6)};
}

// Seconds the library collective takes at least on the link model.
double World::modelled_seconds(const CollectiveCall& call) const {
  if (!link_.enabled() || size_ == 1) return 0;
  const double n = size_, alpha = link_.latency_us * 1e-6;
  const int64_t bytes = 4 * call.count;
  int rounds = 0;  // ceil(log2 n)
  while ((1 << rounds) < size_) ++rounds;
  switch (call.kind) {
    case Collective::AllReduce:  // ring: reduce-scatter + all-gather of S/n chunks
      return 2 * (n - 1) * (alpha + link_.transfer_seconds(int64_t((bytes + n - 1) / n)));
    case Collective::ReduceScatter:  // ring: n-1 steps of one output-sized chunk
    case Collective::AllGather:
      return (n - 1) * (alpha + link_.transfer_seconds(bytes));
    case Collective::Broadcast:  // binomial tree
      return rounds * (alpha + link_.transfer_seconds(bytes));
    case Collective::Barrier:  // dissemination barrier
      return rounds * alpha;
    case Collective::GatherBytes:
      return 0;
  }
  return 0;
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
