// test_ch16_quorum.cpp — your hole, ch16::decide_quorum, against the laws of
// its contract (ch16.h): who is in, the step a quorum goes on from, who heals
// from whom, and when the id changes. Each law is checked on the answer, not
// by computing the answer a second way.
#include "support/catch.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ch16.h"

using namespace dpt::ch16;

namespace {

std::string quorum_case_text(const std::map<int, int64_t>& asked, const QuorumDecision& last, const QuorumDecision& d) {
  std::ostringstream out;
  out << "asked (rank: committed steps) {";
  for (const auto& [rank, committed] : asked) out << " " << rank << ": " << committed;
  out << " }, last quorum " << last.id << " of {";
  for (int r : last.members) out << " " << r;
  out << " } -> members {";
  for (int r : d.members) out << " " << r;
  out << " }, id " << d.id << ", step " << d.step << ", source " << d.source << ", behind {";
  for (int i : d.behind) out << " " << i;
  out << " }";
  return out.str();
}

// The step laws: nobody holds more than `step`, the source holds it, and
// `behind` is exactly who holds less.
void check_step_laws(const std::map<int, int64_t>& asked, const QuorumDecision& d) {
  for (int rank : d.members) {
    INFO("no member goes back in step: member " << rank << " holds " << asked.at(rank)
                                                << " committed steps, the quorum goes on from " << d.step);
    CHECK(asked.at(rank) <= d.step);
  }
  INFO("the source is a member the others can take the quorum's step from: it must hold exactly that step");
  REQUIRE(d.source >= 0);
  REQUIRE(d.source < int(d.members.size()));
  CHECK(asked.at(d.members[std::size_t(d.source)]) == d.step);
  std::vector<int> fewer;
  for (std::size_t i = 0; i < d.members.size(); ++i)
    if (asked.at(d.members[i]) < d.step) fewer.push_back(int(i));
  INFO("behind lists exactly the members (indices, ascending) holding fewer steps than the quorum's");
  CHECK(d.behind == fewer);
}

}  // namespace

TEST_CASE("decide_quorum: the members are exactly the ranks that asked", "[ch16][hole:decide_quorum]") {
  const QuorumDecision last{{0, 1, 2, 3}, 4, 9, 0, {}};
  const std::map<int, int64_t> without_two{{0, 9}, {1, 9}, {3, 9}};
  const QuorumDecision d = decide_quorum(without_two, last);
  INFO(quorum_case_text(without_two, last, d));
  INFO("rank 2 was in the last quorum but did not ask (frozen, or gone): it is not in; every rank that asked is");
  CHECK(d.members == std::vector<int>{0, 1, 3});
  const std::map<int, int64_t> with_joiner{{0, 9}, {1, 9}, {3, 9}, {5, 0}};
  const QuorumDecision j = decide_quorum(with_joiner, d);
  INFO(quorum_case_text(with_joiner, d, j));
  INFO("rank 5 asked (a join): it is in, in ascending order");
  CHECK(j.members == std::vector<int>{0, 1, 3, 5});
}

TEST_CASE("decide_quorum: no member goes back in step, and who is behind heals from who is not",
          "[ch16][hole:decide_quorum]") {
  const QuorumDecision last{{0, 1, 2}, 2, 0, 0, {}};
  // A joiner with nothing; the lowest rank restarted (nothing); two ranks
  // holding different steps (one missed a heal); everyone equal.
  const std::vector<std::map<int, int64_t>> cases = {
      {{0, 12}, {1, 12}, {2, 0}},
      {{0, 0}, {1, 12}, {2, 12}},
      {{0, 3}, {1, 7}, {2, 7}, {4, 0}},
      {{1, 5}, {2, 5}},
  };
  for (const auto& asked : cases) {
    const QuorumDecision d = decide_quorum(asked, last);
    INFO(quorum_case_text(asked, last, d));
    check_step_laws(asked, d);
  }
}

TEST_CASE("decide_quorum: the id changes exactly when the membership does, and is never reused",
          "[ch16][hole:decide_quorum]") {
  // A run's rounds: the same four, one leaves, the same three, it comes back,
  // the same four, another set of three.
  const std::vector<std::map<int, int64_t>> rounds = {
      {{0, 0}, {1, 0}, {2, 0}, {3, 0}}, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}, {{0, 2}, {1, 2}, {2, 2}},
      {{0, 3}, {1, 3}, {2, 3}},         {{0, 4}, {1, 4}, {2, 4}, {3, 0}}, {{0, 5}, {1, 5}, {2, 5}, {3, 5}},
      {{0, 6}, {1, 6}, {3, 6}},
  };
  QuorumDecision last{{0, 1, 2, 3}, 0, 0, 0, {}};
  std::vector<int64_t> used{0};
  for (const auto& asked : rounds) {
    const QuorumDecision d = decide_quorum(asked, last);
    INFO(quorum_case_text(asked, last, d));
    if (d.members == last.members) {
      INFO("the same members as the last quorum: the same id");
      CHECK(d.id == last.id);
    } else {
      INFO("a membership change needs an id no quorum had before (ids seen so far: up to " << used.back() << ")");
      for (int64_t id : used) CHECK(d.id != id);
      CHECK(d.id > last.id);
      used.push_back(d.id);
    }
    last = d;
  }
}
