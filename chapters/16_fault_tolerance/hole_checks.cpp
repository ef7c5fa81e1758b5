// hole_checks.cpp — the verdicts on decide_quorum and assign_samples (ch16.h)
// as the run used them (checks.h): each round the lighthouse decided, judged
// against the ranks that asked; each committed step's size against the flags.
#include <algorithm>
#include <set>

#include "checks.h"
#include "lighthouse.h"

namespace dpt::ch16 {

namespace {

constexpr const char* kQuorumWho = "a quorum is as large as it can be: every rank that asked in time, and no other";
constexpr const char* kQuorumStep = "nothing committed is lost: no member goes back in step";
constexpr const char* kQuorumHeal = "after the heal every member holds the quorum's step, and only those lacking it received";
constexpr const char* kQuorumId = "a quorum's id is never taken for another quorum's: kept while the members are, never reused";

}  // namespace

std::pair<std::string, std::string> broken_quorum_law(const std::map<int, int64_t>& asked, const QuorumDecision& d) {
  std::vector<int> askers;
  for (const auto& [rank, committed] : asked) askers.push_back(rank);
  if (d.members != askers)
    return {kQuorumWho, "quorum " + rank_set_text(d.members) + ", but the ranks that asked were " + rank_set_text(askers)};
  for (int rank : d.members)
    if (asked.at(rank) > d.step)
      return {kQuorumStep, "rank " + std::to_string(rank) + " holds " + std::to_string(asked.at(rank)) +
                               " committed steps, the quorum goes on from " + std::to_string(d.step)};
  if (d.source < 0 || d.source >= int(d.members.size()))
    return {kQuorumHeal, "source index " + std::to_string(d.source) + " names no member of " + rank_set_text(d.members)};
  if (std::count(d.behind.begin(), d.behind.end(), d.source) > 0)
    return {kQuorumHeal, "the source, rank " + std::to_string(d.members[std::size_t(d.source)]) +
                             ", is also among those behind: it would heal from itself"};
  const int64_t sent = asked.at(d.members[std::size_t(d.source)]);
  if (sent != d.step)
    return {kQuorumHeal, "the source, rank " + std::to_string(d.members[std::size_t(d.source)]) + ", holds " +
                             std::to_string(sent) + " committed steps, the quorum's step is " + std::to_string(d.step) +
                             ": who heals from it would not hold the quorum's step"};
  for (std::size_t i = 0; i < d.members.size(); ++i) {
    const bool heals = std::count(d.behind.begin(), d.behind.end(), int(i)) > 0;
    const int64_t held = asked.at(d.members[i]);
    if (heals == (held == d.step))
      return {kQuorumHeal, "rank " + std::to_string(d.members[i]) + " holds " + std::to_string(held) + " of the quorum's " +
                               std::to_string(d.step) + " committed steps and " + (heals ? "receives" : "receives nothing")};
  }
  if (!std::is_sorted(d.behind.begin(), d.behind.end()) || std::adjacent_find(d.behind.begin(), d.behind.end()) != d.behind.end())
    return {kQuorumHeal, "behind " + rank_set_text(d.behind) + ": indices, ascending, each once"};
  return {"", ""};
}

std::string broken_id_law(const std::vector<QuorumDecision>& quorums, const std::vector<std::string>& when) {
  for (std::size_t i = 1; i < quorums.size(); ++i) {
    const QuorumDecision &last = quorums[i - 1], &d = quorums[i];
    if (d.members == last.members) {
      if (d.id != last.id)
        return when[i] + ": the last quorum's members " + rank_set_text(d.members) + " again, but id " +
               std::to_string(d.id) + ", not its " + std::to_string(last.id) +
               ": the same quorum's messages would be taken for another's";
      continue;
    }
    for (std::size_t j = 0; j < i; ++j)
      if (quorums[j].id == d.id)
        return when[i] + ": quorum " + rank_set_text(d.members) + " got id " + std::to_string(d.id) + ", the id of " +
               when[j] + "'s quorum " + rank_set_text(quorums[j].members) +
               ": a message of that quorum would be taken for this one's";
  }
  return "";
}

void add_quorum_verdicts(Verdicts& v, const std::vector<Lighthouse::RoundRecord>& rounds) {
  for (const char* law : {kQuorumWho, kQuorumStep, kQuorumHeal}) {
    std::string seen = std::to_string(rounds.size()) + " quorums, each kept it";
    bool ok = true;
    for (const Lighthouse::RoundRecord& r : rounds) {
      const auto [broken, what] = broken_quorum_law(r.asked, r.decision);
      if (broken == law) {
        ok = false;
        seen = "step " + std::to_string(r.slot) + ": " + what;
        break;
      }
    }
    v.holds(law, ok, seen);
  }
  std::vector<QuorumDecision> quorums;
  std::vector<std::string> when;
  for (const Lighthouse::RoundRecord& r : rounds)
    quorums.push_back(r.decision), when.push_back("step " + std::to_string(r.slot));
  if (rounds.size() < 2) return v.cannot_fail(kQuorumId, "with one round: an id is kept or reused only across rounds");
  const std::string id_seen = broken_id_law(quorums, when);
  v.holds(kQuorumId, id_seen.empty(), id_seen.empty() ? std::to_string(rounds.size()) + " rounds, each kept it" : id_seen);
}

void add_ledger_id_verdict(Verdicts& v, const std::vector<LedgerEntry>& ledger) {
  std::vector<QuorumDecision> quorums;
  std::vector<std::string> when;
  std::set<int64_t> ids;
  for (const LedgerEntry& e : ledger) {
    QuorumDecision d;
    d.members = e.ranks, d.id = e.quorum_id;
    quorums.push_back(d), when.push_back("step " + std::to_string(e.slot));
    ids.insert(e.quorum_id);
  }
  const std::string what = std::string(kQuorumId) + ", across every launch (the ledger)";
  std::set<std::vector<int>> memberships;
  for (const LedgerEntry& e : ledger) memberships.insert(e.ranks);
  if (ids.size() < 2 && memberships.size() < 2)
    return v.cannot_fail(what, "with one quorum in the ledger (one launch): try scripts/dptrun with --fail R@S");
  const std::string seen = broken_id_law(quorums, when);
  v.holds(what, seen.empty(),
          seen.empty() ? std::to_string(ids.size()) + " quorum ids over " + std::to_string(ledger.size()) +
                             " committed steps"
                       : seen);
}

void add_share_verdicts(Verdicts& v, const Options& o, const ElasticSettings& s, const RunRecord& record) {
  std::string seen = "every step " + std::string(s.keep_global_batch ? "b·N0 = " + std::to_string(o.batch * s.world)
                                                                      : "b·n") + " samples";
  bool ok = true;
  for (const LedgerEntry& e : record.ledger) {
    const int64_t expected = s.keep_global_batch ? o.batch * s.world : o.batch * e.members;
    if (int64_t(e.samples.size()) != expected) {
      ok = false;
      seen = "step " + std::to_string(e.slot) + ": " + std::to_string(e.samples.size()) + " samples over " +
             std::to_string(e.members) + " members, the batch policy says " + std::to_string(expected);
      break;
    }
  }
  v.holds("each committed step consumed the policy's global batch", ok, seen);
}

}  // namespace dpt::ch16
