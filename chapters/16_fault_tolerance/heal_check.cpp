// heal_check.cpp — the heal of a rank that is behind, from a live peer, and
// the checksum round that finds a flipped bit and rolls every member back
// (elastic_rank_parts.h).
#include <algorithm>

#include "checks.h"
#include "elastic_rank_parts.h"

namespace dpt::ch16::parts {

// The heal of `joiner` at `slot` (record_.mutex held): the source and the
// joiner each fill their half, in either order.
HealEntry& ElasticRank::heal_entry(int64_t slot, int joiner) {
  for (HealEntry& h : record_.heals)
    if (h.slot == slot && h.joiner == joiner) return h;
  record_.heals.push_back(HealEntry{});
  record_.heals.back().slot = slot;
  record_.heals.back().joiner = joiner;
  return record_.heals.back();
}

// Every member of the quorum calls your heal (ch16.h) when someone is behind;
// around it, the loop's bookkeeping: the bytes the traffic log counted from
// the source to each member behind, what each member behind passed to a
// collective (its own log sees that, under mpirun too), the seconds it took.
void ElasticRank::heal(const Quorum& q, int64_t slot) {
  Communicator& comm = *q.comm;
  const bool behind = std::count(q.behind.begin(), q.behind.end(), q.index) > 0;
  std::vector<int64_t> before;
  for (int j : q.behind) before.push_back(comm.traffic().bytes(q.source, j));
  MemberState me = member_state(st_, last_grad_, rank_, last_step_seconds_);
  const std::size_t psi = me.replica.params.size();
  const int64_t collective_before = collective_payload(comm.traffic(), q.index);
  const auto t0 = SteadyClock::now();
  ch16::heal(comm, q.source, q.behind, me);  // your hole (ch16.h)
  const double seconds = seconds_since(t0);
  DPT_CHECK(me.replica.params.size() == psi && me.replica.momentum.size() == psi,
            "heal: rank " << rank_ << "'s replica changed shape (" << me.replica.params.size() << " parameters, "
                          << me.replica.momentum.size() << " momentum buffers; the model has " << psi << ")");
  take_member_state(st_, last_grad_, me);
  if (behind) snap_ = Snapshot{true, me};  // the source's state, which every voter agreed on just now
  std::lock_guard<std::mutex> lock(record_.mutex);
  if (behind) {
    HealEntry& h = heal_entry(slot, rank_);
    h.seconds = seconds;
    h.collective = collective_payload(comm.traffic(), q.index) - collective_before;
    h.received = me.replica.params;
  }
  if (q.index != q.source) return;
  for (std::size_t k = 0; k < q.behind.size(); ++k) {
    HealEntry& h = heal_entry(slot, q.members[std::size_t(q.behind[k])]);
    h.source = rank_;
    h.bytes = comm.traffic().bytes(q.source, q.behind[k]) - before[k];
    h.sent = me.replica.params;
  }
}

// Every member's checksum; a strict majority's is the good one (without one,
// every voter is named: two replicas can tell that they differ, not who is wrong). A member that is
// behind (about to heal) abstains: it holds no state of the run yet. All
// voters agree: this is the new last good state. One differs: name it,
// every voter goes back to the last good state (which a joiner then gets).
void ElasticRank::check(const Quorum& q, int64_t slot, bool behind) {
  struct Vote {
    uint64_t sum;
    uint64_t voting;
  };
  std::vector<float> flat = flat_parameters(st_);
  const std::vector<Vote> votes = q.comm->all_gather(Vote{behind ? 0 : checksum_of(flat), behind ? 0u : 1u});
  std::vector<uint64_t> sums;
  std::vector<bool> voting;
  for (const Vote& v : votes) sums.push_back(v.sum), voting.push_back(v.voting != 0);
  bool tie = false;
  std::vector<int> named;  // world ranks
  for (int i : checksum_dissenters(sums, voting, tie)) named.push_back(q.members[std::size_t(i)]);
  if (behind) return;
  if (named.empty()) {
    snap_ = Snapshot{true, member_state(st_, last_grad_, rank_, last_step_seconds_)};
    if (q.index == q.source) {
      std::lock_guard<std::mutex> lock(record_.mutex);
      ++record_.checks;
    }
    return;
  }
  DPT_CHECK(snap_.valid, "rank " << rank_ << ": the checksums disagree at step " << slot
                                 << " and this rank has no agreed state to go back to");
  const int64_t back_to = snap_.held.committed, undone = st_.committed - back_to;
  take_member_state(st_, last_grad_, snap_.held);  // the member as it was then, whole
  std::lock_guard<std::mutex> lock(record_.mutex);  // every voter does the same; the first writes the record
  if (record_.ledger.size() > std::size_t(back_to)) record_.ledger.resize(std::size_t(back_to));
  if (record_.mismatches.empty() || record_.mismatches.back().slot != slot)
    record_.mismatches.push_back({slot, named, back_to, undone, tie});
}

}  // namespace dpt::ch16::parts
