// elastic_rank.cpp — one rank of chapter 16 (elastic_rank.h). A slot:
//
//   quorum   ask the lighthouse who trains (bounded wait)
//   check    every K slots and after a change: compare parameter checksums,
//            roll everyone back to the last agreed state if one differs (a
//            member about to heal abstains: a corrupted source is found first)
//   heal     a member behind becomes a replica from a live peer (your heal)
//   fault    this slot's planned event for this rank (fault_plan.h)
//   step     gradient all-reduce, then commit_step (ch16.h): on all or none
//
// The heal and the check are in heal_check.cpp, the state's helpers in
// rank_state.cpp.
//
// A collective that throws (a revoked group, a timeout) drops the slot on
// every member: nobody has applied anything, the cursor has not moved.
#include "elastic_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "ch16.h"
#include "dpt/check.h"
#include "dpt/comm/communicator.h"
#include "dpt/ops.h"
#include "dpt/quorum_group.h"
#include "elastic_rank_parts.h"
#include "ring_step.h"

namespace dpt::ch16 {
namespace parts {

bool ElasticRank::out_until_join(int64_t& slot, bool crashed, const std::string& why) {
  if (crashed) lh_.leave(rank_, why);  // a crash closes the connection; a freeze just goes quiet
  int64_t join = -1;
  for (const FaultEvent& e : plan_.events())
    if (e.rank == rank_ && e.kind == FaultKind::Join && e.step > slot) {
      join = e.step;
      break;
    }
  if (join < 0) return false;
  lh_.expect(rank_, join);  // the restarted process registers when it starts
  if (!lh_.wait_for_slot(join)) return false;
  st_ = fresh_state(o_, device_);  // a new process: nothing of the old one survives
  snap_ = Snapshot{};
  last_grad_.clear(), last_step_seconds_ = 0;
  slow_ = 1;
  slot = join;
  return true;
}

void ElasticRank::keep(Replica& replica) {
  set_flat_parameters(st_, replica.params);
  st_.momentum = std::move(replica.momentum);
}

void ElasticRank::drop(int64_t slot, const std::string& what) {
  lh_.broken(slot);
  std::lock_guard<std::mutex> lock(record_.mutex);
  const std::string prefix = "step " + std::to_string(slot) + ": ";
  for (const std::string& d : record_.dropped)
    if (d.compare(0, prefix.size(), prefix) == 0) return;
  std::string line = what.substr(0, what.find('\n'));
  const std::size_t cause = line.find("failed: ");  // a revoke names the world rank in its reason
  if (cause != std::string::npos) line = line.substr(cause + 8) + " (the group was revoked)";
  if (line.compare(0, 6, "[rank ") == 0) line = line.substr(line.find("] ") + 2);  // format_error's tag
  if (line.find(" waited ") != std::string::npos) {  // a timeout names the group's ranks: say whose they are
    line = line.substr(0, line.find("; other ranks"));
    std::string world;
    for (std::size_t i = 0; i < members_.size(); ++i) world += (i ? ", " : "") + std::to_string(members_[i]);
    line = "in the group of world ranks {" + world + "}, " + line;
  }
  record_.dropped.push_back(prefix + line);
}

// After the last slot: one more quorum and checksum round, so that a flip in
// the last K slots is found too (and a rank behind is healed), as a real run
// checks before its final checkpoint.
void ElasticRank::final_check() {
  const Quorum q = lh_.quorum(rank_, o_.steps, st_.committed);
  if (!q.member) return;
  members_ = q.members;
  const bool behind = std::count(q.behind.begin(), q.behind.end(), q.index) > 0;
  try {
    check(q, o_.steps, behind);
    if (!q.behind.empty()) heal(q, o_.steps);
  } catch (const PeerFailed& failed) {
    drop(o_.steps, failed.what());
  } catch (const Timeout& timeout) {
    drop(o_.steps, timeout.what());
  }
}

void ElasticRank::run() {
  const auto t0 = SteadyClock::now();
  int64_t slot = 0;
  const std::vector<FaultEvent> mine = [&] {
    std::vector<FaultEvent> v;
    for (const FaultEvent& e : plan_.events())
      if (e.rank == rank_) v.push_back(e);
    return v;
  }();
  if (!mine.empty() && mine.front().kind == FaultKind::Join && !out_until_join(slot, false, "")) return;  // a spare
  while (slot < o_.steps) {
    const Quorum q = lh_.quorum(rank_, slot, st_.committed);
    members_ = q.members;
    if (!q.member) {  // left out (asked too late): rejoin next slot with a fresh state, healed
      st_ = fresh_state(o_, device_);
      snap_ = Snapshot{};
      last_grad_.clear(), last_step_seconds_ = 0;
      lh_.expect(rank_, slot + 1);
      ++slot;
      continue;
    }
    const FaultEvent* e = plan_.at(rank_, slot);
    if (e && e->kind == FaultKind::Freeze) {  // stops answering: the others' collective times out
      if (out_until_join(slot, false, "")) continue;
      break;
    }
    if (e && e->kind == FaultKind::Slow) slow_ = e->factor;
    const bool behind = std::count(q.behind.begin(), q.behind.end(), q.index) > 0;
    try {
      if (slot % s_.check_every == 0 || q.new_group || !q.behind.empty()) check(q, slot, behind);
      if (!q.behind.empty()) heal(q, slot);
      if (e && e->kind == FaultKind::BitFlip) flip_a_bit(st_);  // silent: found by a later check
      const bool crash_here = e && e->kind == FaultKind::Crash;
      if (!step(q, slot, crash_here)) {  // crashed: this process is gone
        if (out_until_join(slot, false, "")) continue;
        break;
      }
    } catch (const PeerFailed& failed) {
      if (behind) st_ = fresh_state(o_, device_);  // a half-received heal is no state: heal again
      drop(slot, failed.what());
    } catch (const Timeout& timeout) {
      if (behind) st_ = fresh_state(o_, device_);
      drop(slot, timeout.what());
    }
    ++slot;
  }
  if (slot >= o_.steps) final_check();
  if (slot >= o_.steps) lh_.finished();  // ranks waiting to join later need not wait any more
  std::lock_guard<std::mutex> lock(record_.mutex);
  if (slot >= o_.steps) record_.finals[std::size_t(rank_)] = flat_parameters(st_);
  record_.finish_seconds[std::size_t(rank_)] = seconds_since(t0);
}

// The transaction. Returns false when this rank crashed in it.
bool ElasticRank::step(const Quorum& q, int64_t slot, bool crash_here) {
  const auto t0 = SteadyClock::now();
  const int n = int(q.members.size());
  const StepPlan plan = plan_step(o_, s_, st_.cursor, n, data_.size());  // calls your assign_samples
  const float lr = plan.lr;
  const std::vector<int64_t>& batch = plan.batch;
  const std::vector<int64_t>& shard = plan.share.shards[std::size_t(q.index)];
  bool fine = true;  // this member's own gradient, before the sum
  std::vector<float> grad = member_gradient(st_, data_, shard, int64_t(batch.size()), device_, fine);
  if (slow_ > 1) std::this_thread::sleep_for(std::chrono::duration<double>((slow_ - 1) * seconds_since(t0)));
  if (s_.ring && !ring_all_reduce(*q.comm, grad, crash_here)) {  // died mid-ring: nobody is told
    lh_.leave(rank_, "crashed at step " + std::to_string(slot) + ", in the ring's last hop");
    return false;
  }
  if (!s_.ring) q.comm->all_reduce(grad.data(), int64_t(grad.size()), ReduceOp::Sum);
  if (crash_here) {  // after its gradient went in, before the vote: the survivors hold a full sum
    lh_.leave(rank_, "crashed at step " + std::to_string(slot));
    revoke(*q.comm, "world rank " + std::to_string(rank_) + " crashed at step " + std::to_string(slot));
    return false;
  }
  Replica replica{flat_parameters(st_), std::move(st_.momentum)};
  bool committed = false;
  try {
    if (s_.apply_before_vote) {  // the broken order: applied whatever the vote then says
      apply_momentum(replica, grad, lr);
      Replica ignored = replica;
      committed = commit_step(*q.comm, ignored, grad, lr, fine);
    } else {
      committed = commit_step(*q.comm, replica, grad, lr, fine);  // your hole (ch16.h)
    }
  } catch (...) {
    keep(replica);
    throw;
  }
  keep(replica);
  last_grad_ = std::move(grad);
  last_step_seconds_ = seconds_since(t0);
  if (!committed) {
    drop(slot, "a member's gradient was not finite: the vote said no");
    return true;
  }
  ++st_.committed;
  st_.cursor = plan.share.next_cursor;
  std::lock_guard<std::mutex> lock(record_.mutex);
  std::vector<std::vector<int64_t>>& drawn = record_.drawn[slot];
  drawn.resize(std::size_t(n));
  drawn[std::size_t(q.index)] = shard;  // what this member computed, whatever the others think it took
  if (q.index == 0) record_.ledger.push_back(LedgerEntry{slot, q.id, n, lr, batch, q.members});
  return true;
}

}  // namespace parts

void run_elastic_rank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
                      const ElasticSettings& s, Lighthouse& lighthouse, RunRecord& record) {
  try {
    parts::ElasticRank(rank, device, o, data, plan, s, lighthouse, record).run();
  } catch (const QuorumLawBroken&) {  // every rank stops here; the verdicts name the law
    lighthouse.finished();
  } catch (...) {  // an error that ends the run (an unwritten hole): nobody waits to join any more
    lighthouse.finished();
    throw;
  }
}

}  // namespace dpt::ch16
