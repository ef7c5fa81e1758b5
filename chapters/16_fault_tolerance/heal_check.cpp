// heal_check.cpp — the heal of a rank that is behind, from a live peer, and
// the checksum round that finds a flipped bit and rolls every member back
// (elastic_rank_parts.h).
#include <algorithm>

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

// The source sends, to each member behind, its parameters, its momentum and
// (step, cursor); the joiner takes them and is then a replica like any other.
void ElasticRank::heal(const Quorum& q, int64_t slot) {
  Communicator& comm = *q.comm;
  const int64_t psi = st_.model.num_parameters();
  if (q.index == q.source) {
    std::vector<float> flat = flat_parameters(st_);
    const Cursor where{st_.committed, st_.cursor};
    for (int j : q.behind) {
      const int64_t before = comm.traffic().bytes(q.index, j);
      comm.send(flat.data(), psi, j, 11);
      comm.send(st_.momentum.data(), psi, j, 12);
      comm.send(&where, 1, j, 13);
      std::lock_guard<std::mutex> lock(record_.mutex);
      HealEntry& h = heal_entry(slot, q.members[std::size_t(j)]);
      h.source = rank_;
      h.bytes = comm.traffic().bytes(q.index, j) - before;
      h.expected_bytes = 4 * (psi + psi) + 2 * 8;
      h.sent = flat;
    }
    return;
  }
  const auto t0 = SteadyClock::now();
  std::vector<float> flat(std::size_t(psi), 0.0f);
  comm.recv(flat.data(), psi, q.source, 11);
  comm.recv(st_.momentum.data(), psi, q.source, 12);
  Cursor where{0, 0};
  comm.recv(&where, 1, q.source, 13);
  set_flat_parameters(st_, flat);
  st_.committed = where.committed, st_.cursor = where.cursor;
  snap_ = Snapshot{true, flat, st_.momentum, st_.committed, st_.cursor};  // what every voter agreed on just now
  const double seconds = seconds_since(t0);
  std::lock_guard<std::mutex> lock(record_.mutex);
  HealEntry& h = heal_entry(slot, rank_);
  h.seconds = seconds;
  h.received = flat_parameters(st_);
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
    snap_ = Snapshot{true, flat, st_.momentum, st_.committed, st_.cursor};
    if (q.index == q.source) {
      std::lock_guard<std::mutex> lock(record_.mutex);
      ++record_.checks;
    }
    return;
  }
  DPT_CHECK(snap_.valid, "rank " << rank_ << ": the checksums disagree at step " << slot
                                 << " and this rank has no agreed state to go back to");
  const int64_t undone = st_.committed - snap_.committed;
  set_flat_parameters(st_, snap_.params);
  st_.momentum = snap_.momentum;
  st_.committed = snap_.committed, st_.cursor = snap_.cursor;
  std::lock_guard<std::mutex> lock(record_.mutex);  // every voter does the same; the first writes the record
  if (record_.ledger.size() > std::size_t(snap_.committed)) record_.ledger.resize(std::size_t(snap_.committed));
  if (record_.mismatches.empty() || record_.mismatches.back().slot != slot)
    record_.mismatches.push_back({slot, named, snap_.committed, undone, tie});
}

}  // namespace dpt::ch16::parts
