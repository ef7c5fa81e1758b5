// test_ch16_quorum.cpp — your hole, ch16::decide_quorum, against what the run
// needs of a quorum (ch16.h): as large as it can be, nothing committed lost,
// one state for all after the heal, and an id never taken for another
// quorum's. Each law is checked on the answer (the heal is played out on the
// steps each rank holds), not by computing the answer a second way.
#include "support/catch.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ch16.h"

using namespace dpt::ch16;

namespace {

std::string quorum_ranks_text(const std::vector<int>& ranks) {
  std::string text = "{";
  for (int r : ranks) text += " " + std::to_string(r);
  return text + " }";
}

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

// Plays the heal out on the committed steps each member holds (the members at
// `behind` take the source's, the others keep theirs), then holds the result
// to the contract: nobody went back, all hold `step`, only who lacked it received.
void check_quorum_heal_laws(const std::map<int, int64_t>& asked, const QuorumDecision& d) {
  {
    INFO("every rank that asked is a member (the case on who is in says more)");
    REQUIRE(d.members.size() == asked.size());
  }
  for (int i : d.behind) {
    INFO("behind holds indices into members: " << i);
    REQUIRE((i >= 0 && i < int(d.members.size())));
  }
  {
    INFO("the source is an index into members: " << d.source);
    REQUIRE((d.source >= 0 && d.source < int(d.members.size())));
  }
  const int64_t sent = asked.at(d.members[std::size_t(d.source)]);
  for (std::size_t i = 0; i < d.members.size(); ++i) {
    const int rank = d.members[i];
    const bool heals = std::count(d.behind.begin(), d.behind.end(), int(i)) > 0;
    const int64_t after = heals ? sent : asked.at(rank);
    INFO("rank " << rank << " holds " << asked.at(rank) << " committed steps, " << (heals ? "heals" : "keeps its own")
                 << ", and holds " << after << " after the heal; the quorum goes on from " << d.step);
    {
      INFO("nothing committed is lost: no rank that asked goes back");
      CHECK(after >= asked.at(rank));
    }
    {
      INFO("after the heal every member holds the same state, the quorum's step");
      CHECK(after == d.step);
    }
    {
      INFO("only members that lack the quorum's state receive anything");
      CHECK((!heals || asked.at(rank) != d.step));
    }
  }
  INFO("behind: ascending, each member once");
  CHECK(std::is_sorted(d.behind.begin(), d.behind.end()));
  CHECK(std::adjacent_find(d.behind.begin(), d.behind.end()) == d.behind.end());
}

}  // namespace

TEST_CASE("decide_quorum: a quorum is as large as it can be, with no rank that may be dead",
          "[ch16][hole:decide_quorum]") {
  const QuorumDecision last{{0, 1, 2, 3}, 4, 9, 0, {}};
  const std::map<int, int64_t> without_two{{0, 9}, {1, 9}, {3, 9}};
  const QuorumDecision d = decide_quorum(without_two, last);
  INFO(quorum_case_text(without_two, last, d));
  INFO("rank 2 was in the last quorum but did not ask: to the lighthouse it may be dead; every rank that asked trains");
  CHECK(d.members == std::vector<int>{0, 1, 3});
  const std::map<int, int64_t> with_joiner{{0, 9}, {1, 9}, {3, 9}, {5, 0}};
  const QuorumDecision j = decide_quorum(with_joiner, d);
  INFO(quorum_case_text(with_joiner, d, j));
  INFO("rank 5 asked holding nothing (a join): it is alive, so it trains; members ascending");
  CHECK(j.members == std::vector<int>{0, 1, 3, 5});
}

TEST_CASE("decide_quorum: nothing committed is lost, and after the heal all hold one state",
          "[ch16][hole:decide_quorum]") {
  const QuorumDecision last{{0, 1, 2}, 2, 0, 0, {}};
  // A joiner with nothing; the lowest rank restarted (nothing); two ranks
  // holding different steps (one missed a heal), the most on neither end;
  // everyone equal.
  const std::vector<std::map<int, int64_t>> cases = {
      {{0, 12}, {1, 12}, {2, 0}},
      {{0, 0}, {1, 12}, {2, 12}},
      {{0, 3}, {1, 7}, {2, 5}, {4, 0}},
      {{1, 5}, {2, 5}},
  };
  for (const auto& asked : cases) {
    const QuorumDecision d = decide_quorum(asked, last);
    INFO(quorum_case_text(asked, last, d));
    check_quorum_heal_laws(asked, d);
  }
}

TEST_CASE("decide_quorum: a quorum's id is never taken for another quorum's, over a run's rounds",
          "[ch16][hole:decide_quorum]") {
  // A run's rounds: the same four, one leaves, the same three, it comes back,
  // the same four, another set of three, the first three again.
  const std::vector<std::map<int, int64_t>> rounds = {
      {{0, 0}, {1, 0}, {2, 0}, {3, 0}}, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}, {{0, 2}, {1, 2}, {2, 2}},
      {{0, 3}, {1, 3}, {2, 3}},         {{0, 4}, {1, 4}, {2, 4}, {3, 0}}, {{0, 5}, {1, 5}, {2, 5}, {3, 5}},
      {{0, 6}, {1, 6}, {3, 6}},         {{0, 7}, {1, 7}, {2, 0}},
  };
  std::vector<QuorumDecision> quorums{QuorumDecision{{0, 1, 2, 3}, 0, 0, 0, {}}};  // the run's start
  for (const auto& asked : rounds) {
    const QuorumDecision& last = quorums.back();
    const QuorumDecision d = decide_quorum(asked, last);
    INFO(quorum_case_text(asked, last, d));
    if (d.members == last.members) {
      INFO("the last quorum's members again: the same quorum, its messages its own, the same id");
      CHECK(d.id == last.id);
    } else {
      for (std::size_t j = 0; j < quorums.size(); ++j) {
        INFO("a new quorum, but id " << d.id << " named an earlier quorum, of " << quorum_ranks_text(quorums[j].members)
                                     << ": a message of that one would be taken for this one's");
        CHECK(d.id != quorums[j].id);
      }
    }
    quorums.push_back(d);
  }
}
