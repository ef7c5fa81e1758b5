// lighthouse.cpp — the quorum service (lighthouse.h): rounds by step slot,
// each formed once, when every expected rank has asked or the wait is over.
#include "lighthouse.h"

#include <algorithm>
#include <sstream>

#include "dpt/check.h"
#include "dpt/quorum_group.h"

namespace dpt::ch16 {

std::string rank_set_text(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << "{";
  for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << "}";
  return out.str();
}

Lighthouse::Lighthouse(int world, const std::vector<int>& first, double wait_s, double group_timeout_s)
    : world_(world), wait_s_(wait_s), group_timeout_s_(group_timeout_s), expected_(first.begin(), first.end()),
      last_members_(first) {
  last_decision_.members = first;
}

void Lighthouse::leave(int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  expected_.erase(rank);
  pending_change_ += (pending_change_.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + " left (" + why + ")");
  wake_.notify_all();
}

void Lighthouse::expect(int rank, int64_t slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  joining_[rank] = slot;
  wake_.notify_all();
}

void Lighthouse::broken(int64_t) {
  std::lock_guard<std::mutex> lock(mutex_);
  broken_ = true;
}

void Lighthouse::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  over_ = true;
  wake_.notify_all();
}

bool Lighthouse::wait_for_slot(int64_t slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return over_ || formed_up_to_ >= slot - 1; });
  return !over_ || formed_up_to_ >= slot - 1;
}

std::vector<std::string> Lighthouse::history() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return history_;
}

std::vector<Lighthouse::RoundRecord> Lighthouse::decisions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return decisions_;
}

// Every rank expected at `slot`: the last quorum's members still in, and the
// joiners due by now.
void Lighthouse::form(int64_t slot, Round& round) {
  std::set<int> due = expected_;
  for (const auto& [rank, from] : joining_)
    if (from <= slot) due.insert(rank);
  std::string change = pending_change_;
  pending_change_.clear();
  for (int rank : due)
    if (!round.asked.count(rank)) {
      change += (change.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + " did not ask within " +
                                                std::to_string(wait_s_).substr(0, 4) + " s: left out as failed");
    }
  const QuorumDecision d = decide_quorum(round.asked, last_decision_);  // your hole
  round.members = d.members;
  round.step = d.step;
  round.source = d.source;
  round.behind = d.behind;
  decisions_.push_back(RoundRecord{slot, round.asked, d});
  const auto [law, seen] = broken_quorum_law(round.asked, d);
  if (!law.empty())  // a group built on it would hang or part the replicas: stop, and let the verdicts say why
    throw QuorumLawBroken("decide_quorum (ch16.h), step " + std::to_string(slot) + ": " + law + " — " + seen);
  for (int rank : round.members)
    if (!std::count(last_members_.begin(), last_members_.end(), rank))
      change += (change.empty() ? "" : "; ") + ("rank " + std::to_string(rank) + " joined");
  const bool changed = round.members != last_members_;
  last_id_ = d.id;
  last_decision_ = d;
  if (changed || broken_ || !group_) {
    if (group_) old_groups_.push_back(group_);
    group_ = std::make_shared<std::vector<std::unique_ptr<Communicator>>>(
        make_threads_group(int(round.members.size()), group_timeout_s_));
    round.new_group = true;
    broken_ = false;
  }
  round.id = last_id_;
  round.group = group_;
  round.change = change;
  if (changed || slot == 0)
    history_.push_back("step " + std::to_string(slot) + ": quorum " + std::to_string(round.id) + " = ranks " +
                       rank_set_text(round.members) + (change.empty() ? "" : ": " + change));
  last_members_ = round.members;
  expected_ = std::set<int>(round.members.begin(), round.members.end());
  for (auto it = joining_.begin(); it != joining_.end();) it = it->second <= slot ? joining_.erase(it) : std::next(it);
  round.formed = true;
  formed_up_to_ = std::max(formed_up_to_, slot);
  wake_.notify_all();
}

Quorum Lighthouse::quorum(int rank, int64_t slot, int64_t committed) {
  DPT_CHECK(rank >= 0 && rank < world_, "lighthouse: rank " << rank << " of " << world_);
  std::unique_lock<std::mutex> lock(mutex_);
  Round& round = rounds_[slot];
  if (!round.formed) {
    if (round.asked.empty()) {
      round.opened = std::chrono::steady_clock::now();
      round.deadline = round.opened + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                          std::chrono::duration<double>(wait_s_));
    }
    round.asked[rank] = committed;
    wake_.notify_all();
    for (;;) {
      if (error_) std::rethrow_exception(error_);
      if (round.formed) break;
      bool all = true, holder = false;  // a holder: a rank of the last quorum, so the run's state goes on
      for (int r : expected_) all = all && round.asked.count(r);
      for (const auto& [r, from] : joining_) all = all && (from > slot || round.asked.count(r));
      for (int r : last_members_) holder = holder || round.asked.count(r);
      const auto now = std::chrono::steady_clock::now();
      if (all || (now >= round.deadline && holder)) {
        try {
          form(slot, round);
        } catch (...) {  // an error in the decision ends the run for every asker, not just this one
          error_ = std::current_exception();
          over_ = true;
          wake_.notify_all();
          throw;
        }
        break;
      }
      if (now >= round.deadline + 4 * (round.deadline - round.opened))
        DPT_FAIL("the quorum of step " << slot << ": no rank of the last quorum " << rank_set_text(last_members_)
                                       << " asked within 5 x --detect-timeout: the run's state is gone with them");
      wake_.wait_until(lock, now >= round.deadline ? now + (round.deadline - round.opened) / 10 : round.deadline);
    }
  }
  Quorum q;
  auto at = std::find(round.members.begin(), round.members.end(), rank);
  if (at == round.members.end()) return q;  // asked after the quorum formed without it
  q.member = true;
  q.id = round.id;
  q.members = round.members;
  q.index = int(at - round.members.begin());
  q.comm = (*round.group)[std::size_t(q.index)].get();
  q.step = round.step;
  q.source = round.source;
  q.behind = round.behind;
  q.new_group = round.new_group;
  q.change = round.change;
  return q;
}

}  // namespace dpt::ch16
