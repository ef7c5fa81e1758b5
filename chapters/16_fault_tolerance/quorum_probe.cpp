// quorum_probe.cpp — your decide_quorum judged alone, before the run
// (checks.h): six rounds of a run written out here, each answer the next
// round's `last`, held to the contract's laws, so a wrong decision is named
// even while a later hole is unwritten.
#include <string>
#include <vector>

#include "ch16.h"
#include "checks.h"
#include "lighthouse.h"

namespace dpt::ch16 {

namespace {
struct ProbeRound {
  const char* what;
  std::map<int, int64_t> asked;  // rank -> committed steps it holds
};
}  // namespace

void add_quorum_probe_verdicts(Verdicts& v) {
  const std::vector<ProbeRound> rounds = {
      {"all four in, as before", {{0, 5}, {1, 5}, {2, 5}, {3, 5}}},
      {"rank 3 gone", {{0, 6}, {1, 6}, {2, 6}}},
      {"rank 3 back with nothing", {{0, 7}, {1, 7}, {2, 7}, {3, 0}}},
      {"rank 3 gone again", {{0, 8}, {1, 8}, {2, 8}}},
      {"rank 1 gone, rank 0 restarted from an old state", {{0, 3}, {2, 9}}},
      {"the same two, level again", {{0, 10}, {2, 10}}}};
  QuorumDecision start;
  start.members = {0, 1, 2, 3}, start.id = 0, start.step = 4;
  std::vector<QuorumDecision> quorums{start};
  std::vector<std::string> when{"the run's start"};
  std::string laws;
  for (const ProbeRound& r : rounds) {
    const QuorumDecision d = decide_quorum(r.asked, quorums.back());  // your hole
    const auto [law, seen] = broken_quorum_law(r.asked, d);
    if (!law.empty() && laws.empty()) laws = std::string(r.what) + ": " + law + " — " + seen;
    quorums.push_back(d), when.push_back(str("round \"", r.what, "\""));
  }
  const std::string ids = broken_id_law(quorums, when);
  v.holds("decide_quorum, six rounds alone: who is in, that nothing committed is lost, who heals", laws.empty(),
          laws.empty() ? "every law of ch16.h held" : laws);
  v.holds("decide_quorum, six rounds alone: a quorum's id is never taken for another quorum's", ids.empty(),
          ids.empty() ? "kept while the members were, never reused" : ids);
}

}  // namespace dpt::ch16
