// comm_threads.cpp — the threads backend: N ranks as threads of one process.
//
// All ranks of a world share one `World`: a mutex, one condition variable per
// rank (what that rank sleeps on), the mailboxes, the collective staging
// slots, and per-rank status for error messages.
//
// Point-to-point. A mailbox per (src, dst, tag) holds messages in send order
// and receives posted in recv order. A send that finds a posted receive copies
// straight into the receiver's buffer (one memcpy: rendezvous); otherwise it
// copies into a (pooled) buffer in the mailbox and returns (eager), and the
// receiver copies out later: send() never waits for the receiver. sendrecv()
// posts its receive first and, when the receiver is not there yet, lends it
// its send buffer instead of copying and waits until it has been taken: one
// memcpy per message either way, which is what a ring all-reduce spends.
//
// Link model. Each rank has one full-duplex port onto a switch. A message of S
// bytes starts when the sender's out-port and the receiver's in-port are both
// free, holds both for S/beta, and arrives alpha later. So messages on one link
// queue behind each other, and so do messages converging on one rank (why a
// parameter server is slow). The sender returns when its message has left the
// port; the receiver returns at arrival. Library collectives take at least the
// time of the matching bandwidth-optimal algorithm on that model (ring
// all-reduce 2(n-1)(alpha + S/(n beta)), and so on; see modelled_seconds).
//
// Collectives. Every rank posts its buffers in its slot and waits for all
// (phase A, checks that all ranks called the same thing with the same counts);
// then each rank does its share of the work reading the others' buffers
// directly, summing in rank order; then all wait again (phase B) so nobody
// returns, and lets its buffers go, while a peer may still read them.
//
// Failure. Every wait has a deadline (the timeout) and watches an abort flag;
// a rank that times out names what every rank is blocked on, and stops them.
// The only waits that ignore both are ones a peer is sure to end soon: a peer
// copying into or out of our buffer, and phase B (every rank is past phase A
// and only copying). Before a rank throws it withdraws whatever of its own a
// peer could still reach (a posted receive, a lent buffer).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

#include "dpt/comm.h"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps until `when`, finishing with short yields: a plain sleep overshoots
// by ~50-100 us, more than the whole latency of an NVLink message.
void sleep_until_precise(Clock::time_point when) {
  constexpr auto kSpin = std::chrono::microseconds(200);
  if (when - Clock::now() > kSpin) std::this_thread::sleep_until(when - kSpin);
  while (Clock::now() < when) std::this_thread::yield();
}

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// ---- what a rank is blocked on (for timeout messages) ----

struct WaitState {
  const char* call;  // "recv", "all_reduce", ...
  int peer;          // -1 for collectives
  int tag;
  int64_t count;     // floats (bytes for all_gather_bytes)
  bool to_peer;      // waiting for `peer` to take our message (sendrecv)
};

std::string describe(const WaitState& w) {
  std::ostringstream out;
  const char* floats = w.count == 1 ? " float" : " floats";
  out << "in " << w.call;
  if (w.peer >= 0) {
    out << (w.to_peer ? " to rank " : " from rank ") << w.peer << " (tag " << w.tag << ", "
        << w.count << floats << (w.to_peer ? ", not yet received)" : ")");
  } else if (std::strcmp(w.call, "barrier") != 0) {
    out << " (" << w.count << floats << ")";
  }
  return out.str();
}

// ---- point-to-point ----

// A sendrecv's outgoing buffer, lent to the receiver instead of copied. Lives
// on the sender's stack; the sender does not leave while it is Queued (it
// withdraws it) or Claimed (the receiver is copying out of it).
struct LentSend {
  enum State { Queued, Claimed, Taken, Failed };
  State state = Queued;
  std::string error;
};

struct Message {
  std::unique_ptr<float[]> owned;  // an eager send's copy (capacity >= count), or
  int64_t capacity = 0;
  const float* lent = nullptr;     // a sendrecv's own buffer, and its state
  LentSend* lender = nullptr;
  int64_t count = 0;
  Clock::time_point arrival;
  const float* data() const { return lent ? lent : owned.get(); }
};

// A receive waiting in a mailbox. Lives on the receiver's stack; a sender may
// write into `buffer` only after moving it to Claimed, and the receiver does
// not leave until it is no longer Claimed.
struct PostedRecv {
  enum State { Posted, Claimed, Done, Failed };
  PostedRecv(float* buf, int64_t n) : buffer(buf), count(n) {}
  float* buffer;
  int64_t count;
  State state = Posted;
  Message message;  // when Done by taking a queued message (copied out later)
  bool has_message = false;
  Clock::time_point arrival;
  std::string error;
};

struct Mailbox {
  std::deque<Message> messages;
  std::deque<PostedRecv*> posted;  // never both non-empty at rest
};

// Eager buffers are reused: a fresh large allocation costs a page fault per
// 4 KiB on first touch, which would halve the bandwidth of repeated sends.
constexpr int64_t kPoolBytes = int64_t(256) << 20;
constexpr std::size_t kPoolBuffers = 64;

// ---- collectives ----

enum class Kind { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, GatherBytes };
const char* kind_name(Kind k) {
  static const char* names[] = {"all_reduce", "reduce_scatter", "all_gather",
                                "broadcast",  "barrier",        "all_gather_bytes"};
  return names[int(k)];
}

struct Slot {
  Kind kind = Kind::Barrier;
  int64_t count = 0;  // floats; bytes for GatherBytes
  int root = 0;
  ReduceOp op = ReduceOp::Sum;
  const void* send = nullptr;
  void* recv = nullptr;
};

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

// out[i] = sum over ranks k (in rank order) of in_k[offset + i], i < count.
void reduce_in_rank_order(const std::vector<Slot>& slots, int64_t offset, int64_t count, float* out,
                          ReduceOp op) {
  if (count == 0) return;
  std::memcpy(out, static_cast<const float*>(slots[0].send) + offset, count * sizeof(float));
  for (std::size_t k = 1; k < slots.size(); ++k) {
    const float* in = static_cast<const float*>(slots[k].send) + offset;
    for (int64_t i = 0; i < count; ++i) out[i] += in[i];
  }
  if (op == ReduceOp::Avg) {
    const float n = float(slots.size());
    for (int64_t i = 0; i < count; ++i) out[i] /= n;
  }
}

// ----------------------------------------------------------------------------
// the world all ranks share

class World {
 public:
  World(int size, double timeout_s, const LinkModel& link)
      : size_(size), timeout_(to_duration(timeout_s)), timeout_s_(timeout_s), link_(link),
        wake_(size), out_free_(size), in_free_(size), slots_(size), arrived_(size, false),
        waits_(size), finished_(size, false) {
    for (auto& cv : wake_) cv = std::make_unique<std::condition_variable>();
  }

  void send(int me, const float* data, int64_t count, int dst, int tag);
  void recv(int me, float* data, int64_t count, int src, int tag);
  void sendrecv(int me, const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag);
  // Runs one collective: `share` is this rank's part of the work (between
  // phases A and B), `after` runs once every rank's share is done.
  template <class Share, class After>
  void collective(int me, const Slot& slot, Share&& share, After&& after);
  void fail(int me, const std::string& message, bool primary);
  RankFailure finish(int me);

  std::vector<float> scratch;  // all_reduce result, sized at phase A

 private:
  // ---- called with mutex_ held ----
  Mailbox& box(int src, int dst, int tag) { return boxes_[{src, dst, tag}]; }
  void wake_all() { for (auto& cv : wake_) cv->notify_all(); }
  // Reserves the ports for `bytes` from src to dst; returns {departure, arrival}.
  std::pair<Clock::time_point, Clock::time_point> reserve_link(int src, int dst, int64_t bytes);
  void check_not_aborted();
  [[noreturn]] void throw_timeout(int me, const WaitState& what, const std::string& waiting_for);
  std::string others_status(int me) const;
  std::string validate_slots() const;
  std::string leftover_messages() const;
  void post(int me, PostedRecv& r, int src, int tag);
  void copy_to_posted(std::unique_lock<std::mutex>& lock, Mailbox& mb, const float* data,
                      int64_t count, int me, int dst, int tag, Clock::time_point arrival);
  void wait_p2p(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src, LentSend* lent,
                int dst, int tag, int64_t send_count, const char* call);
  void withdraw(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src, LentSend* lent,
                int dst, int tag);
  Message take_buffer(int64_t count);
  void recycle(Message& m);
  // ---- called without mutex_ ----
  void copy_out(int me, PostedRecv& r, int src, int tag);
  // Seconds the library collective `s` takes at least on the link model.
  double modelled_seconds(const Slot& s) const;

  const int size_;
  const Clock::duration timeout_;
  const double timeout_s_;
  const LinkModel link_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::condition_variable>> wake_;  // one per rank
  std::map<std::tuple<int, int, int>, Mailbox> boxes_;        // (src, dst, tag)
  std::vector<Clock::time_point> out_free_, in_free_;          // link model ports
  std::vector<std::pair<std::unique_ptr<float[]>, int64_t>> pool_;  // (buffer, capacity)
  int64_t pooled_bytes_ = 0;
  // collectives
  std::vector<Slot> slots_;
  std::vector<bool> arrived_;
  int arrived_count_ = 0, done_count_ = 0;
  uint64_t phase_a_ = 0, phase_b_ = 0;  // generations
  std::string collective_error_;
  Clock::time_point collective_start_;
  // status
  std::vector<std::vector<const WaitState*>> waits_;  // per rank: what it is blocked on
  std::vector<bool> finished_;
  int finished_count_ = 0;
  bool aborted_ = false;
  RankFailure failure_;
  bool failure_primary_ = false;
};

// Registers a wait of rank `me` for the duration of a scope (mutex held at
// both ends).
class WaitScope {
 public:
  WaitScope(std::vector<const WaitState*>& list, const WaitState& state) : list_(list), state_(&state) {
    list_.push_back(state_);
  }
  ~WaitScope() { list_.erase(std::find(list_.begin(), list_.end(), state_)); }

 private:
  std::vector<const WaitState*>& list_;
  const WaitState* state_;
};

std::pair<Clock::time_point, Clock::time_point> World::reserve_link(int src, int dst, int64_t bytes) {
  Clock::time_point now = Clock::now();
  Clock::time_point start = std::max({now, out_free_[src], in_free_[dst]});
  Clock::time_point departure = start + to_duration(link_.transfer_seconds(bytes));
  out_free_[src] = in_free_[dst] = departure;
  return {departure, departure + to_duration(link_.latency_us * 1e-6)};
}

void World::check_not_aborted() {
  if (aborted_) {
    throw PeerFailed(detail::format_error(
        __FILE__, __LINE__,
        "stopped because rank " + std::to_string(failure_.rank) + " failed: " + failure_.message));
  }
}

std::string World::others_status(int me) const {
  std::ostringstream out;
  bool all_waiting = true;
  for (int r = 0; r < size_; ++r) {
    if (r == me) continue;
    out << (out.tellp() > 0 ? "; " : "") << "rank " << r;
    if (finished_[r]) {
      out << " has finished";
    } else if (!waits_[r].empty()) {
      out << " waiting " << describe(*waits_[r].back());
      continue;
    } else {
      out << " running (not in a communication call)";
    }
    all_waiting = false;
  }
  if (size_ == 1) return "no other ranks";
  if (all_waiting) out << ". Every rank is waiting on another: a deadlock";
  return out.str();
}

void World::throw_timeout(int me, const WaitState& what, const std::string& waiting_for) {
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", timeout_s_);
  std::string message = detail::format_error(
      __FILE__, __LINE__,
      "rank " + std::to_string(me) + " waited " + waited + " s " + describe(what) + waiting_for +
          "; other ranks: " + others_status(me) + " (raise --comm-timeout if a peer is only slow)");
  // Stop the world now, while this picture of who waits on whom is true: the
  // other ranks throw PeerFailed instead of timing out one by one.
  failure_ = {me, message};
  failure_primary_ = true;
  aborted_ = true;
  wake_all();
  throw Timeout(message);
}

// ---- point-to-point ----

Message World::take_buffer(int64_t count) {
  Message m;
  int best = -1;  // the smallest pooled buffer that fits
  for (std::size_t i = 0; i < pool_.size(); ++i)
    if (pool_[i].second >= count && (best < 0 || pool_[i].second < pool_[best].second)) best = int(i);
  if (best >= 0) {
    m.owned = std::move(pool_[best].first);
    m.capacity = pool_[best].second;
    pooled_bytes_ -= 4 * m.capacity;
    pool_.erase(pool_.begin() + best);
  } else {
    m.capacity = std::max<int64_t>(count, 1);
    m.owned.reset(new float[m.capacity]);
  }
  return m;
}

void World::recycle(Message& m) {
  if (!m.owned || pool_.size() >= kPoolBuffers || pooled_bytes_ + 4 * m.capacity > kPoolBytes) return;
  pooled_bytes_ += 4 * m.capacity;
  pool_.emplace_back(std::move(m.owned), m.capacity);
}

// The rendezvous path: the first receive posted in `mb` is waiting, so copy
// straight into its buffer (the lock is released for the copy).
void World::copy_to_posted(std::unique_lock<std::mutex>& lock, Mailbox& mb, const float* data,
                           int64_t count, int me, int dst, int tag, Clock::time_point arrival) {
  PostedRecv* r = mb.posted.front();
  mb.posted.pop_front();
  if (r->count != count) {
    std::ostringstream msg;
    msg << "rank " << me << " sent " << count << " floats to rank " << dst << " (tag " << tag
        << "), but rank " << dst << " posted a recv of " << r->count
        << " floats: a recv must name exactly the count of its send";
    r->state = PostedRecv::Failed;
    r->error = msg.str();
    wake_[dst]->notify_all();
    DPT_FAIL(msg.str());
  }
  r->state = PostedRecv::Claimed;
  lock.unlock();
  if (count) std::memcpy(r->buffer, data, count * sizeof(float));
  lock.lock();
  r->state = PostedRecv::Done;
  r->arrival = arrival;
  wake_[dst]->notify_all();
}

void World::send(int me, const float* data, int64_t count, int dst, int tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  DPT_CHECK(!finished_[dst] || dst == me,
            "rank " << me << " sends " << count << " floats to rank " << dst << " (tag " << tag
                    << "), but rank " << dst << " has finished its function: nobody will receive it");
  Clock::time_point departure, arrival;
  if (link_.enabled()) std::tie(departure, arrival) = reserve_link(me, dst, 4 * count);
  Mailbox& mb = box(me, dst, tag);
  if (mb.messages.empty() && !mb.posted.empty()) {
    copy_to_posted(lock, mb, data, count, me, dst, tag, arrival);
  } else {
    // Eager: copy into a mailbox buffer outside the lock, and return without
    // waiting for the receiver. Only this rank sends on this key, so the
    // message still lands behind the ones sent before it.
    Message m = take_buffer(count);
    lock.unlock();
    if (count) std::memcpy(m.owned.get(), data, count * sizeof(float));
    m.count = count;
    m.arrival = arrival;
    lock.lock();
    if (mb.messages.empty() && !mb.posted.empty()) {  // a receiver came meanwhile: hand it over
      PostedRecv* r = mb.posted.front();
      mb.posted.pop_front();
      r->message = std::move(m);
      r->has_message = true;
      r->state = PostedRecv::Done;
    } else {
      mb.messages.push_back(std::move(m));
    }
    wake_[dst]->notify_all();
  }
  lock.unlock();
  if (link_.enabled()) sleep_until_precise(departure);
}

void World::post(int me, PostedRecv& r, int src, int tag) {
  Mailbox& mb = box(src, me, tag);
  if (!mb.messages.empty() && mb.posted.empty()) {
    r.message = std::move(mb.messages.front());
    mb.messages.pop_front();
    if (r.message.lender) r.message.lender->state = LentSend::Claimed;  // its sender waits for our copy
    r.has_message = true;
    r.state = PostedRecv::Done;
  } else {
    mb.posted.push_back(&r);
  }
}

// Takes back what this rank left where peers can reach it, before it throws:
// an unmatched receive, an unclaimed lent buffer, a lent message it took but
// will not copy. Waits out copies already under way (they end soon).
void World::withdraw(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src,
                     LentSend* lent, int dst, int tag) {
  if (r && r->state == PostedRecv::Posted) {
    auto& posted = box(src, me, tag).posted;
    posted.erase(std::find(posted.begin(), posted.end(), r));
  }
  if (r && r->has_message && r->message.lender) {
    r->message.lender->state = LentSend::Failed;
    r->message.lender->error = "rank " + std::to_string(me) + " stopped before receiving it";
    r->has_message = false;
    wake_[src]->notify_all();
  }
  if (lent && lent->state == LentSend::Queued) {
    auto& messages = box(me, dst, tag).messages;
    messages.erase(std::find_if(messages.begin(), messages.end(),
                                [&](const Message& m) { return m.lender == lent; }));
  }
  while ((r && r->state == PostedRecv::Claimed) || (lent && lent->state == LentSend::Claimed))
    wake_[me]->wait(lock);
}

// Waits until this rank's receive `r` (if any) is complete and its lent
// buffer `lent` (if any) has been copied by `dst`. Mutex held throughout.
void World::wait_p2p(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src,
                     LentSend* lent, int dst, int tag, int64_t send_count, const char* call) {
  auto receiving = [&] { return r && (r->state == PostedRecv::Posted || r->state == PostedRecv::Claimed); };
  auto lending = [&] { return lent && (lent->state == LentSend::Queued || lent->state == LentSend::Claimed); };
  WaitState what{call, src, tag, r ? r->count : 0, false};
  WaitScope scope(waits_[me], what);
  Clock::time_point deadline = Clock::now() + timeout_;
  for (;;) {
    if (r && r->state == PostedRecv::Failed) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL(r->error);
    }
    if (lent && lent->state == LentSend::Failed) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL(lent->error);
    }
    if (!receiving() && !lending()) return;
    what = receiving() ? WaitState{call, src, tag, r->count, false}
                       : WaitState{call, dst, tag, send_count, true};
    // A peer is copying into our buffer or out of our lent one: it will be
    // done soon, and we must not leave before.
    if ((r && r->state == PostedRecv::Claimed) || (lent && lent->state == LentSend::Claimed)) {
      wake_[me]->wait(lock);
      continue;
    }
    if (aborted_) {
      withdraw(lock, me, r, src, lent, dst, tag);
      check_not_aborted();
    }
    if (receiving() && finished_[src] && src != me) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL("rank " << me << " waits in " << call << " from rank " << src << " (tag " << tag << ", "
                       << r->count << " floats), but rank " << src
                       << " has finished its function: no message can come (a missing send?)");
    }
    if (!receiving() && finished_[dst] && dst != me) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL("rank " << me << " waits in " << call << " for rank " << dst << " to receive "
                       << send_count << " floats (tag " << tag << "), but rank " << dst
                       << " has finished its function without receiving them (a missing recv?)");
    }
    if (Clock::now() >= deadline) {
      withdraw(lock, me, r, src, lent, dst, tag);
      throw_timeout(me, what, "");
    }
    wake_[me]->wait_until(lock, deadline);
  }
}

// Copies a message that receive `r` took from the mailbox into its buffer,
// then frees its sender (a lent buffer) or recycles its buffer (eager).
void World::copy_out(int me, PostedRecv& r, int src, int tag) {
  Message& m = r.message;
  std::string error;
  if (m.count != r.count) {
    std::ostringstream msg;
    msg << "rank " << me << " expected " << r.count << " floats from rank " << src << " (tag " << tag
        << "), but rank " << src << " sent " << m.count
        << " floats: a recv must name exactly the count of its send";
    error = msg.str();
  } else if (r.count) {
    std::memcpy(r.buffer, m.data(), r.count * sizeof(float));
  }
  r.arrival = m.arrival;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (m.lender) {
      m.lender->state = error.empty() ? LentSend::Taken : LentSend::Failed;
      m.lender->error = error;
      wake_[src]->notify_all();
    } else {
      recycle(m);
    }
  }
  if (!error.empty()) DPT_FAIL(error);
}

void World::recv(int me, float* data, int64_t count, int src, int tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  PostedRecv r(data, count);
  post(me, r, src, tag);
  wait_p2p(lock, me, &r, src, nullptr, -1, tag, 0, "recv");
  lock.unlock();
  if (r.has_message) copy_out(me, r, src, tag);
  if (link_.enabled()) sleep_until_precise(r.arrival);
}

void World::sendrecv(int me, const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                     int64_t recv_count, int src, int tag) {
  // Post the receive first, then send: if `dst` has posted its receive, copy
  // straight into it; if not, lend it our buffer (no copy) and wait until it
  // has copied. Every rank of a ring does the same at once, and each pair
  // completes as soon as its second member arrives, so no rank waits on a
  // cycle. One memcpy per message, whoever arrives first.
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  DPT_CHECK(!finished_[dst] || dst == me,
            "rank " << me << " sends " << send_count << " floats to rank " << dst << " (tag " << tag
                    << "), but rank " << dst << " has finished its function: nobody will receive it");
  PostedRecv r(recv_buf, recv_count);
  post(me, r, src, tag);
  Clock::time_point departure, arrival;
  if (link_.enabled()) std::tie(departure, arrival) = reserve_link(me, dst, 4 * send_count);
  LentSend lent;
  bool lending = false;
  Mailbox& out = box(me, dst, tag);
  if (out.messages.empty() && !out.posted.empty()) {
    try {
      copy_to_posted(lock, out, send_buf, send_count, me, dst, tag, arrival);
    } catch (...) {
      withdraw(lock, me, &r, src, nullptr, dst, tag);
      throw;
    }
  } else {
    Message m;
    m.lent = send_buf;
    m.lender = &lent;
    m.count = send_count;
    m.arrival = arrival;
    out.messages.push_back(std::move(m));
    lending = true;
    wake_[dst]->notify_all();
  }
  wait_p2p(lock, me, &r, src, lending ? &lent : nullptr, dst, tag, send_count, "sendrecv");
  lock.unlock();
  if (r.has_message) copy_out(me, r, src, tag);
  if (link_.enabled()) sleep_until_precise(std::max(departure, r.arrival));
}

// ---- collectives ----

std::string World::validate_slots() const {
  std::ostringstream out;
  auto list = [&](auto field) {
    for (int r = 0; r < size_; ++r) out << (r ? ", " : "") << "rank " << r << ": " << field(slots_[r]);
  };
  const Slot& first = slots_[0];
  const char* what = kind_name(first.kind);
  for (const Slot& s : slots_) {
    if (s.kind != first.kind) {
      out << "ranks called different collectives at the same point (";
      list([](const Slot& t) { return kind_name(t.kind); });
      out << "): every rank must call the same collectives in the same order";
      return out.str();
    }
  }
  for (const Slot& s : slots_) {
    if (s.count != first.count) {
      out << what << ": ranks passed different counts (";
      list([](const Slot& t) { return t.count; });
      out << "): every rank must pass the same count";
      return out.str();
    }
    if (s.root != first.root) {
      out << what << ": ranks named different roots (";
      list([](const Slot& t) { return t.root; });
      out << ")";
      return out.str();
    }
    if (s.op != first.op) {
      out << what << ": ranks asked for different reductions (";
      list([](const Slot& t) { return reduce_op_name(t.op); });
      out << ")";
      return out.str();
    }
  }
  return "";
}

double World::modelled_seconds(const Slot& s) const {
  if (!link_.enabled() || size_ == 1) return 0;
  const double n = size_, alpha = link_.latency_us * 1e-6;
  const int64_t bytes = 4 * s.count;
  int rounds = 0;  // ceil(log2 n)
  while ((1 << rounds) < size_) ++rounds;
  switch (s.kind) {
    case Kind::AllReduce:  // ring: reduce-scatter + all-gather of S/n chunks
      return 2 * (n - 1) * (alpha + link_.transfer_seconds(int64_t((bytes + n - 1) / n)));
    case Kind::ReduceScatter:  // ring: n-1 steps of one output-sized chunk
    case Kind::AllGather:
      return (n - 1) * (alpha + link_.transfer_seconds(bytes));
    case Kind::Broadcast:  // binomial tree
      return rounds * (alpha + link_.transfer_seconds(bytes));
    case Kind::Barrier:  // dissemination barrier
      return rounds * alpha;
    case Kind::GatherBytes:
      return 0;
  }
  return 0;
}

template <class Share, class After>
void World::collective(int me, const Slot& slot, Share&& share, After&& after) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  // ---- phase A: every rank posts its slot; the last one checks them all ----
  slots_[me] = slot;
  arrived_[me] = true;
  uint64_t generation = phase_a_;
  if (++arrived_count_ == size_) {
    collective_error_ = validate_slots();
    if (collective_error_.empty() && slot.kind == Kind::AllReduce) scratch.resize(slot.count);
    collective_start_ = Clock::now();
    arrived_count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++phase_a_;
    wake_all();
  } else {
    WaitState what{kind_name(slot.kind), -1, 0, slot.count, false};
    WaitScope scope(waits_[me], what);
    Clock::time_point deadline = Clock::now() + timeout_;
    while (phase_a_ == generation) {
      auto leave = [&] {  // un-post, so the others never read our buffers
        arrived_[me] = false;
        --arrived_count_;
      };
      std::string missing;
      bool one_finished = false;
      for (int r = 0; r < size_; ++r) {
        if (arrived_[r]) continue;
        missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(r);
        one_finished = one_finished || finished_[r];
      }
      if (aborted_) {
        leave();
        check_not_aborted();
      }
      if (one_finished) {
        leave();
        DPT_FAIL("rank " << me << " waits " << describe(what) << " for " << missing
                         << ", and one of them has finished its function without calling it");
      }
      if (Clock::now() >= deadline) {
        leave();
        throw_timeout(me, what, " for " + missing + ", which did not call it");
      }
      wake_[me]->wait_until(lock, deadline);
    }
  }
  if (!collective_error_.empty()) DPT_FAIL(collective_error_);
  std::vector<Slot> slots = slots_;
  Clock::time_point start = collective_start_;
  lock.unlock();

  share(slots);

  // ---- phase B: nobody leaves (and frees its buffers) before all shares are done ----
  lock.lock();
  generation = phase_b_;
  if (++done_count_ == size_) {
    done_count_ = 0;
    ++phase_b_;
    wake_all();
  } else {
    while (phase_b_ == generation) wake_[me]->wait(lock);
  }
  lock.unlock();
  after();
  if (link_.enabled()) sleep_until_precise(start + to_duration(modelled_seconds(slot)));
}

// ---- failure and the end of a rank's function ----

void World::fail(int me, const std::string& message, bool primary) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.any() || (primary && !failure_primary_)) {
    failure_ = {me, message};
    failure_primary_ = primary;
  }
  aborted_ = true;
  wake_all();
}

std::string World::leftover_messages() const {
  for (const auto& [key, mb] : boxes_) {
    if (mb.messages.empty()) continue;
    auto [src, dst, tag] = key;
    std::ostringstream out;
    out << "rank " << src << " sent " << mb.messages.size() << " message(s) of "
        << mb.messages.front().count << " floats to rank " << dst << " (tag " << tag
        << ") that rank " << dst << " never received: every send needs a matching recv";
    return out.str();
  }
  return "";
}

RankFailure World::finish(int me) {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_[me] = true;
  wake_all();  // peers waiting on this rank can stop now
  if (++finished_count_ == size_) {
    std::string leftover = failure_.any() ? "" : leftover_messages();
    if (!leftover.empty()) failure_ = {me, leftover};
  }
  // No timeout: a peer may legitimately compute for long after we are done.
  while (finished_count_ < size_) wake_[me]->wait(lock);
  return failure_;
}

// ----------------------------------------------------------------------------
// the communicator: one per rank, all pointing at the same World

class ThreadsCommunicator final : public Communicator {
 public:
  ThreadsCommunicator(std::shared_ptr<World> world, int rank, int size, double timeout_s,
                      TrafficLog log)
      : Communicator(rank, size, "threads", timeout_s, std::move(log)), world_(std::move(world)) {}
  ~ThreadsCommunicator() override { stop_async(); }

  void fail(const std::string& message, bool primary) override { world_->fail(rank(), message, primary); }
  RankFailure finish() override { return world_->finish(rank()); }

 protected:
  void do_send(const float* data, int64_t count, int dst, int tag) override {
    world_->send(rank(), data, count, dst, tag);
  }
  void do_recv(float* data, int64_t count, int src, int tag) override {
    world_->recv(rank(), data, count, src, tag);
  }
  void do_sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                   int64_t recv_count, int src, int tag) override {
    world_->sendrecv(rank(), send_buf, send_count, dst, recv_buf, recv_count, src, tag);
  }

  void do_all_reduce(float* data, int64_t count, ReduceOp op) override {
    // Rank r reduces elements [r*chunk, (r+1)*chunk) into the shared scratch;
    // after phase B every rank copies the whole result out (so all agree bit
    // for bit, and nobody overwrites its input while a peer still reads it).
    const int n = size(), me = rank();
    const int64_t chunk = (count + n - 1) / n;
    const int64_t begin = std::min(count, me * chunk), end = std::min(count, begin + chunk);
    Slot slot{Kind::AllReduce, count, 0, op, data, data};
    world_->collective(
        me, slot,
        [&](const std::vector<Slot>& slots) {
          reduce_in_rank_order(slots, begin, end - begin, world_->scratch.data() + begin, op);
        },
        [&] {
          if (count) std::memcpy(data, world_->scratch.data(), count * sizeof(float));
        });
  }

  void do_reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                         ReduceOp op) override {
    const int me = rank();
    // Write straight into recv_buf unless it overlaps our send_buf, which
    // peers are reading until phase B.
    bool direct = !overlaps(recv_buf, recv_count * 4, send_buf, recv_count * 4 * size());
    std::vector<float> staged(direct ? 0 : recv_count);
    float* out = direct ? recv_buf : staged.data();
    Slot slot{Kind::ReduceScatter, recv_count, 0, op, send_buf, recv_buf};
    world_->collective(
        me, slot,
        [&](const std::vector<Slot>& slots) { reduce_in_rank_order(slots, me * recv_count, recv_count, out, op); },
        [&] {
          if (!direct && recv_count) std::memcpy(recv_buf, out, recv_count * sizeof(float));
        });
  }

  void do_all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override {
    const int me = rank();
    const std::size_t row = send_count * sizeof(float);
    // In place (send_buf is our own row of recv_buf) needs no staging: we
    // never write that row, and peers only read it.
    bool in_place = send_buf == recv_buf + me * send_count;
    bool direct = in_place || !overlaps(recv_buf, row * size(), send_buf, row);
    std::vector<float> staged(direct ? 0 : send_count * size());
    float* out = direct ? recv_buf : staged.data();
    Slot slot{Kind::AllGather, send_count, 0, ReduceOp::Sum, send_buf, recv_buf};
    world_->collective(
        me, slot,
        [&](const std::vector<Slot>& slots) {
          for (int k = 0; k < size(); ++k)
            if (row && !(in_place && k == me)) std::memcpy(out + k * send_count, slots[k].send, row);
        },
        [&] {
          if (!direct && row) std::memcpy(recv_buf, out, row * size());
        });
  }

  void do_broadcast(float* data, int64_t count, int root) override {
    Slot slot{Kind::Broadcast, count, root, ReduceOp::Sum, data, data};
    world_->collective(
        rank(), slot,
        [&](const std::vector<Slot>& slots) {
          if (rank() != root && count) std::memcpy(data, slots[root].send, count * sizeof(float));
        },
        [] {});
  }

  void do_barrier() override {
    world_->collective(rank(), Slot{}, [](const std::vector<Slot>&) {}, [] {});
  }

  void do_all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    Slot slot{Kind::GatherBytes, bytes, 0, ReduceOp::Sum, send, recv};
    world_->collective(
        rank(), slot,
        [&](const std::vector<Slot>& slots) {
          for (int k = 0; k < size(); ++k)
            if (bytes) std::memcpy(static_cast<char*>(recv) + k * bytes, slots[k].send, bytes);
        },
        [] {});
  }

 private:
  std::shared_ptr<World> world_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_threads_world(int size, double timeout_s,
                                                              const LinkModel& link) {
  DPT_CHECK(size >= 1, "a world needs at least one rank, got " << size);
  DPT_CHECK(timeout_s > 0, "the communication timeout must be > 0 s, got " << timeout_s);
  DPT_CHECK(link.gbps >= 0 && link.latency_us >= 0,
            "link bandwidth and latency must be >= 0, got " << link.gbps << " Gbps, "
                                                            << link.latency_us << " us");
  auto world = std::make_shared<World>(size, timeout_s, link);
  TrafficLog log(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r)
    comms.push_back(std::make_unique<ThreadsCommunicator>(world, r, size, timeout_s, log.view(r)));
  return comms;
}

}  // namespace dpt
