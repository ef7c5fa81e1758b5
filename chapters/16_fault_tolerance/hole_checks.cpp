// hole_checks.cpp — the verdicts on decide_quorum and assign_samples (ch16.h)
// as the run used them (checks.h): each round the lighthouse decided, judged
// against the ranks that asked; each committed step's size against the flags.
#include <algorithm>

#include "checks.h"
#include "lighthouse.h"

namespace dpt::ch16 {

namespace {

constexpr const char* kQuorumWho = "a quorum is exactly the ranks that asked in time";
constexpr const char* kQuorumStep = "no member goes back in step: a quorum goes on from the newest state a member holds";
constexpr const char* kQuorumHeal = "the members behind, and only they, are healed";

}  // namespace

std::pair<std::string, std::string> broken_quorum_law(const std::map<int, int64_t>& asked, const QuorumDecision& d) {
  std::vector<int> askers;
  int64_t most = 0;
  for (const auto& [rank, committed] : asked) askers.push_back(rank), most = std::max(most, committed);
  if (d.members != askers)
    return {kQuorumWho, "quorum " + rank_set_text(d.members) + ", but the ranks that asked were " + rank_set_text(askers)};
  const bool source_ok = d.source >= 0 && d.source < int(d.members.size()) &&
                         asked.at(d.members[std::size_t(d.source)]) == d.step;
  if (d.step != most || !source_ok)
    return {kQuorumStep, "the quorum goes on from " + std::to_string(d.step) + " committed steps, a member holds " +
                             std::to_string(most) + (source_ok ? "" : ", and its source does not hold the quorum's step")};
  std::vector<int> fewer;
  for (std::size_t i = 0; i < d.members.size(); ++i)
    if (asked.at(d.members[i]) < d.step) fewer.push_back(int(i));
  if (d.behind != fewer)
    return {kQuorumHeal, "healed members at " + rank_set_text(d.behind) + ", those holding fewer steps are at " +
                             rank_set_text(fewer)};
  return {"", ""};
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
