// hole_checks.cpp — the verdicts on decide_quorum and assign_samples (ch16.h)
// as the run used them (checks.h): each round the lighthouse decided, judged
// against the ranks that asked; each committed step's size against the flags.
#include <algorithm>

#include "checks.h"

namespace dpt::ch16 {

namespace {

std::string quorum_ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "{" + out + "}";
}

}  // namespace

void add_quorum_verdicts(Verdicts& v, const std::vector<Lighthouse::RoundRecord>& rounds) {
  std::string who = std::to_string(rounds.size()) + " quorums, each of the ranks that asked";
  std::string newest = "every quorum went on from the most steps a member held, and healed from a holder of them";
  std::string heals = "every quorum healed exactly the members holding fewer steps";
  bool who_ok = true, newest_ok = true, heals_ok = true;
  for (const Lighthouse::RoundRecord& r : rounds) {
    const QuorumDecision& d = r.decision;
    const std::string at = "step " + std::to_string(r.slot) + ": ";
    std::vector<int> askers;
    int64_t most = 0;
    for (const auto& [rank, committed] : r.asked) askers.push_back(rank), most = std::max(most, committed);
    if (who_ok && d.members != askers) {
      who_ok = false;
      who = at + "quorum " + quorum_ranks_text(d.members) + ", but the ranks that asked were " + quorum_ranks_text(askers);
    }
    if (!who_ok) continue;  // the other laws read the members' committed steps
    const bool source_ok = d.source >= 0 && d.source < int(d.members.size()) &&
                           r.asked.at(d.members[std::size_t(d.source)]) == d.step;
    if (newest_ok && (d.step != most || !source_ok)) {
      newest_ok = false;
      newest = at + "the quorum goes on from " + std::to_string(d.step) + " committed steps, a member holds " +
               std::to_string(most) + (source_ok ? "" : "; its source does not hold the quorum's step");
    }
    std::vector<int> fewer;
    for (std::size_t i = 0; i < d.members.size(); ++i)
      if (r.asked.at(d.members[i]) < d.step) fewer.push_back(int(i));
    if (heals_ok && d.behind != fewer) {
      heals_ok = false;
      heals = at + "healed members at " + quorum_ranks_text(d.behind) + ", those holding fewer steps are at " +
              quorum_ranks_text(fewer);
    }
  }
  v.holds("a quorum is exactly the ranks that asked in time", who_ok, who);
  v.holds("no member goes back in step", newest_ok, newest);
  v.holds("the members behind, and only they, are healed", heals_ok, heals);
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
