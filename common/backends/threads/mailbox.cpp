// mailbox.cpp — point-to-point messages between threads ranks: where a
// message is copied. One Mailbox per (src, dst, tag) holds messages in send
// order and receives in post order (never both at rest).
//
// How a send travels, by what it finds in the mailbox:
//
//   receive posted?  yes -> copy straight into the receiver's buffer (1 memcpy)
//                    no, bytes <= eager limit -> EAGER: copy into a pooled
//                        buffer, queue it, return; the receiver copies it out
//                    no, bytes >  eager limit -> RENDEZVOUS: queue our own
//                        buffer (lent, no copy) and wait until the receiver
//                        has copied out of it, as MPI does above its eager
//                        limit. Two ranks that both send first then deadlock,
//                        here as under mpirun, and the timeout names them.
//   sendrecv posts its receive first, then always lends (rendezvous, any size):
//   every rank of a ring does the same, and each pair completes when its
//   second member arrives.
//
// A lent buffer lives on the sender's stack; the sender may not leave while
// a receiver can still read it:
//
//   LentSend:  Queued --receiver posts, takes it--> Claimed --copied--> Taken
//                 |                                    |
//                 +--sender withdraws (error, abort)   +--count mismatch or
//                    before anyone took it                receiver stopped --> Failed
//
// A posted receive lives on the receiver's stack; a sender writes into it only
// after claiming it:
//
//   PostedRecv: Posted --sender claims--> Claimed --copied--> Done
//                 |  \--takes a queued message---------------> Done (copy_out later)
//                 +--count mismatch (sender says so) --------> Failed
//
// Before a rank throws it withdraws what of its own a peer could still reach
// (withdraw()). Eager copies live in pooled buffers (buffer_pool.cpp).
//
// Buffers may be GPU memory: every copy goes through copy_floats (a memcpy
// for host memory, gpu_floats.h), so an eager GPU message waits in a host
// buffer, and a rendezvous one is copied GPU to GPU by its receiver.
#include <algorithm>
#include <exception>
#include <sstream>
#include <string>

#include "comm/gpu_floats.h"
#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

// ----------------------------------------------------------------------------
// sending

// A receive is waiting in `mb`: copy straight into its buffer (the lock is
// released for the copy; the receiver waits while its receive is Claimed).
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
  try {
    copy_floats(r->buffer, data, count);
  } catch (const std::exception& e) {  // a CUDA error: the receiver fails too, and nobody waits on
    lock.lock();                       // a Claimed receive forever (the lock held again, as callers expect)
    r->state = PostedRecv::Failed;
    r->error = "rank " + std::to_string(me) + "'s copy into this receive failed: " + e.what();
    wake_[dst]->notify_all();
    throw;
  }
  lock.lock();
  r->state = PostedRecv::Done;
  r->arrival = arrival;
  wake_[dst]->notify_all();
}

// Eager: copy into a pooled buffer outside the lock, queue it, don't wait.
// Only this rank sends on this mailbox, so the message still lands behind the
// ones sent before it.
void World::queue_eager(std::unique_lock<std::mutex>& lock, Mailbox& mb, const float* data,
                        int64_t count, int dst, Clock::time_point arrival) {
  Message m = take_buffer(count);
  lock.unlock();
  copy_floats(m.owned.get(), data, count);
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

// Rendezvous: queue our own buffer (no copy) for dst to copy out of; the
// caller then waits until `lent` is Taken (or Failed).
void World::lend(Mailbox& mb, const float* data, int64_t count, LentSend* lent, int dst,
                 Clock::time_point arrival) {
  Message m;
  m.lent = data;
  m.lender = lent;
  m.count = count;
  m.arrival = arrival;
  mb.messages.push_back(std::move(m));
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
  } else if (4 * count <= eager_limit_) {
    queue_eager(lock, mb, data, count, dst, arrival);
  } else {  // rendezvous: lend our buffer and wait until dst has copied it
    LentSend lent;
    lend(mb, data, count, &lent, dst, arrival);
    wait_p2p(lock, me, nullptr, -1, &lent, dst, tag,
             WaitState{"send", dst, tag, count, true, eager_limit_});
  }
  lock.unlock();
  if (link_.enabled()) sleep_on_link(me, departure, "send");
}

// ----------------------------------------------------------------------------
// receiving

// Takes the first queued message (Done at once) or queues the receive.
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
  } else {
    try {
      copy_floats(r.buffer, m.data(), r.count);
    } catch (const std::exception& e) {  // a CUDA error: the lender is told, not left Claimed
      error = "rank " + std::to_string(me) + " could not copy " + std::to_string(r.count) +
              " floats from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + "): " + e.what();
    }
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
  wait_p2p(lock, me, &r, src, nullptr, -1, tag, WaitState{"recv", -1, tag, 0, true});
  lock.unlock();
  if (r.has_message) copy_out(me, r, src, tag);
  if (link_.enabled()) sleep_on_link(me, r.arrival, "recv");
}

void World::sendrecv(int me, const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                     int64_t recv_count, int src, int tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  DPT_CHECK(!finished_[dst] || dst == me,
            "rank " << me << " sends " << send_count << " floats to rank " << dst << " (tag " << tag
                    << "), but rank " << dst << " has finished its function: nobody will receive it");
  PostedRecv r(recv_buf, recv_count);
  post(me, r, src, tag);
  if (r.has_message) {  // taken from the queue: its sender may be a rendezvous send waiting for this copy, so
    lock.unlock();      // copy now, before our own send waits (for that sender's next receive, perhaps)
    copy_out(me, r, src, tag);
    r.has_message = false;
    lock.lock();
    check_not_aborted();
  }
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
    lend(out, send_buf, send_count, &lent, dst, arrival);
    lending = true;
  }
  wait_p2p(lock, me, &r, src, lending ? &lent : nullptr, dst, tag,
           WaitState{"sendrecv", dst, tag, send_count, true});
  lock.unlock();
  if (r.has_message) copy_out(me, r, src, tag);
  if (link_.enabled()) sleep_on_link(me, std::max(departure, r.arrival), "sendrecv");
}

// ----------------------------------------------------------------------------
// waiting, and withdrawing before a throw

// Takes back what this rank left where peers can reach it: an unmatched
// receive, an unclaimed lent buffer, a lent message it took but will not copy
// (its sender then throws PeerFailed). Waits out copies already under way.
void World::withdraw(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src,
                     LentSend* lent, int dst, int tag) {
  if (r && r->state == PostedRecv::Posted) {
    auto& posted = box(src, me, tag).posted;
    posted.erase(std::find(posted.begin(), posted.end(), r));
  }
  if (r && r->has_message && r->message.lender) {
    r->message.lender->state = LentSend::Failed;
    r->message.lender->peer_stopped = true;
    r->message.lender->error = "stopped because rank " + std::to_string(me) +
                               " stopped before receiving this rank's message";
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

// Waits until receive `r` (if any) is complete and lent buffer `lent` (if
// any) has been copied by `dst`. `sending` describes the send half for the
// report. Mutex held throughout.
void World::wait_p2p(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src,
                     LentSend* lent, int dst, int tag, const WaitState& sending) {
  auto receiving = [&] { return r && (r->state == PostedRecv::Posted || r->state == PostedRecv::Claimed); };
  auto lending = [&] { return lent && (lent->state == LentSend::Queued || lent->state == LentSend::Claimed); };
  WaitState what = sending;
  WaitScope scope(waits_[me], what);
  Clock::time_point deadline = Clock::now() + timeout_;
  for (;;) {
    if (r && r->state == PostedRecv::Failed) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL(r->error);
    }
    if (lent && lent->state == LentSend::Failed) {
      withdraw(lock, me, r, src, lent, dst, tag);
      if (lent->peer_stopped) throw PeerFailed(dpt::detail::format_error(__FILE__, __LINE__, lent->error));
      DPT_FAIL(lent->error);
    }
    if (!receiving() && !lending()) return;
    what = receiving() ? WaitState{sending.call, src, tag, r->count, false} : sending;
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
      DPT_FAIL("rank " << me << " waits in " << sending.call << " from rank " << src << " (tag "
                       << tag << ", " << r->count << " floats), but rank " << src
                       << " has finished its function: no message can come (a missing send?)");
    }
    if (!receiving() && finished_[dst] && dst != me) {
      withdraw(lock, me, r, src, lent, dst, tag);
      DPT_FAIL("rank " << me << " waits in " << sending.call << " for rank " << dst << " to receive "
                       << sending.count << " floats (tag " << tag << "), but rank " << dst
                       << " has finished its function without receiving them (a missing recv?)");
    }
    if (Clock::now() >= deadline) {
      withdraw(lock, me, r, src, lent, dst, tag);
      throw_timeout(me, what, "");
    }
    wake_[me]->wait_until(lock, deadline);
  }
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
