// wait_report.cpp — the deadlock report: what a threads-backend timeout says.
//
// Every blocking wait registers a WaitState (WaitScope) saying what the rank
// waits in and on whom. A rank whose wait passes the timeout names itself,
// then every other rank's state ("rank 1 waiting in send to rank 0 (...)",
// "running", "has finished"), and says "a deadlock" when all of them wait.
// What the rank it waited on is doing names the likely cause: sending to
// this rank too (both send first), or in no communication call at all
// (it stopped: frozen, or far slower).
// It stops the world at once, so that picture stays true: the other ranks
// throw PeerFailed instead of timing out one by one.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "threads/world.h"
#include "dpt/device.h"

namespace dpt {
namespace detail {
namespace threads {

WaitScope::~WaitScope() { list_.erase(std::find(list_.begin(), list_.end(), state_)); }

std::string describe(const WaitState& w) {
  std::ostringstream out;
  const char* floats = w.count == 1 ? " float" : " floats";
  out << "in " << w.call;
  if (w.peer < 0) {
    if (std::strcmp(w.call, "barrier") != 0) out << " (" << w.count << floats << ")";
  } else if (!w.to_peer) {
    out << " from rank " << w.peer << " (tag " << w.tag << ", " << w.count << floats << ")";
  } else if (w.eager_limit >= 0) {
    out << " to rank " << w.peer << " (tag " << w.tag << ", " << w.count << floats
        << "; rendezvous: " << format_bytes(4.0 * double(w.count)) << " is above the "
        << format_bytes(double(w.eager_limit)) << " eager limit, so the send waits until rank "
        << w.peer << " posts its receive)";
  } else {
    out << " to rank " << w.peer << " (tag " << w.tag << ", " << w.count << floats
        << ", not yet received)";
  }
  return out.str();
}

std::string World::others_status(int me) const {
  std::ostringstream out;
  bool all_waiting = true;
  for (int r = 0; r < size_; ++r) {
    if (r == me) continue;
    out << (out.tellp() > 0 ? "; " : "") << name(r);
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

std::string World::peer_evidence(int me, const WaitState& what) const {
  const int p = what.peer;
  if (p < 0 || p == me || p >= size_ || finished_[p]) return "";
  const std::string peer = "rank " + std::to_string(p);
  if (waits_[p].empty())
    return ": " + peer + " is in no communication call, so it stopped (frozen), or it is far slower than this rank";
  const WaitState& theirs = *waits_[p].back();
  if (what.to_peer && theirs.to_peer && theirs.peer == me)
    return ": " + peer + " is sending to this rank too: both ranks are sending, each waiting for the other to receive";
  return "";
}

void World::throw_timeout(int me, const WaitState& what, const std::string& waiting_for) {
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", timeout_s_);
  std::string message = format_error(
      __FILE__, __LINE__,
      name(me) + " waited " + waited + " s " + describe(what) + waiting_for +
          peer_evidence(me, what) + "; other ranks: " + others_status(me) + numbering() +
          " (raise --comm-timeout if a peer is only slow)");
  failure_ = {me, message};
  failed_world_rank_ = world_rank(me);
  failure_primary_ = true;
  aborted_ = true;
  wake_all();
  stop_children();
  throw Timeout(message);
}

// Messages still queued when every rank has finished: sends nobody received.
std::string World::leftover_messages() const {
  for (const auto& [key, mb] : boxes_) {
    if (mb.messages.empty()) continue;
    auto [src, dst, tag] = key;
    std::ostringstream out;
    out << name(src) << " sent " << mb.messages.size() << " message(s) of " << mb.messages.front().count
        << " floats to " << name(dst) << " (tag " << tag << (world_ranks_.empty() ? "" : ", in a sub-communicator")
        << ") that rank " << dst << " never received: every send needs a matching recv";
    return out.str();
  }
  return "";
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
