// quorum_probe.cpp — your decide_quorum judged alone, before the run
// (checks.h): four rounds written out here, each held to the contract's
// laws, so a wrong decision is named even while a later hole is unwritten.
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
  QuorumDecision last;
};
}  // namespace

void add_quorum_probe_verdicts(Verdicts& v) {
  auto last = [](std::vector<int> members, int64_t id, int64_t step) {
    QuorumDecision d;
    d.members = std::move(members), d.id = id, d.step = step;
    return d;
  };
  const std::vector<ProbeRound> rounds = {
      {"all four in, as before", {{0, 5}, {1, 5}, {2, 5}, {3, 5}}, last({0, 1, 2, 3}, 7, 4)},
      {"rank 3 back with nothing", {{0, 11}, {1, 11}, {2, 11}, {3, 0}}, last({0, 1, 2}, 1, 10)},
      {"rank 1 gone", {{0, 6}, {2, 6}}, last({0, 1, 2}, 2, 5)},
      {"rank 1 one step behind rank 2", {{1, 3}, {2, 4}}, last({1, 2}, 3, 3)}};
  std::string laws, ids;
  for (const ProbeRound& r : rounds) {
    const QuorumDecision d = decide_quorum(r.asked, r.last);  // your hole
    const auto [law, seen] = broken_quorum_law(r.asked, d);
    if (!law.empty() && laws.empty()) laws = std::string(r.what) + ": " + law + " — " + seen;
    const bool same = d.members == r.last.members;
    if ((same ? d.id != r.last.id : d.id <= r.last.id) && ids.empty())
      ids = str(r.what, ": members ", rank_set_text(d.members), " after ", rank_set_text(r.last.members), " (id ",
                r.last.id, "), id ", d.id, same ? ": the same members keep their id" : ": new members, a new id above it");
  }
  v.holds("decide_quorum, four rounds alone: who is in, the step it goes on from, who heals", laws.empty(),
          laws.empty() ? "every law of ch16.h held" : laws);
  v.holds("decide_quorum, four rounds alone: the id changes exactly when the membership does", ids.empty(),
          ids.empty() ? "kept where the members were the last quorum's, above it where not" : ids);
}

}  // namespace dpt::ch16
