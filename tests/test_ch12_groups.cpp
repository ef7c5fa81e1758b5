// test_ch12_groups.cpp — chapter 12's communicator groups: the layout of
// T × D ranks written out by hand, a wrong membership reported as a sentence
// naming the rank, and every rank's groups checked on rank threads.
#include "support/catch.h"
#include <mutex>
#include <string>
#include <vector>

#include "groups.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch12;

TEST_CASE("groups: TP groups are consecutive ranks, DP groups the ranks with the same TP index", "[ch12]") {
  // T = 2, D = 3 on 6 ranks: TP {0,1} {2,3} {4,5}; DP {0,2,4} {1,3,5}.
  CHECK(expected_tp_members(0, 2, 3) == std::vector<int>{0, 1});
  CHECK(expected_tp_members(5, 2, 3) == std::vector<int>{4, 5});
  CHECK(expected_dp_members(3, 2, 3) == std::vector<int>{1, 3, 5});
  CHECK(expected_dp_members(4, 2, 3) == std::vector<int>{0, 2, 4});
  // T = 4, D = 1: one TP group, DP groups of one.
  CHECK(expected_tp_members(2, 4, 1) == std::vector<int>{0, 1, 2, 3});
  CHECK(expected_dp_members(2, 4, 1) == std::vector<int>{2});
}

TEST_CASE("groups: a wrong membership is one sentence naming the rank and both lists", "[ch12]") {
  CHECK(group_problem(5, "TP", {4, 5}, {4, 5}).empty());
  const std::string wrong = group_problem(5, "TP", {4, 5}, {1, 5});
  INFO(wrong);
  CHECK(wrong.find("rank 5's TP group holds world ranks [1 5], expected [4 5]") != std::string::npos);
  CHECK(!group_problem(1, "DP", {1, 3}, {3, 1}).empty());  // the right ranks in the wrong order: group ranks differ
}

namespace {
// Every rank's line from check_groups on 4 rank threads split T x D (rank 0 returns them all).
std::vector<std::string> group_lines(int T, int D) {
  std::mutex mutex;
  std::vector<std::string> lines;
  int others_listing = 0;  // ranks other than 0 return nothing
  dpt_test::run_ranks(T * D, [&](Context& ctx) {
    Groups groups(ctx, T, D);
    std::vector<std::string> mine = check_groups(ctx, groups);
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.is_root()) lines = mine;
    else others_listing += mine.empty() ? 0 : 1;
  });
  CHECK(others_listing == 0);
  return lines;
}
}  // namespace

TEST_CASE("groups: on 4 rank threads every rank's groups are checked and listed, T x D = 4 x 1 and 2 x 2", "[ch12]") {
  std::vector<std::string> lines = group_lines(4, 1);
  REQUIRE(lines.size() == 4);
  CHECK(lines[3] == "rank 3: TP group [0 1 2 3] as t=3, DP group [3] as d=0");
  lines = group_lines(2, 2);  // two splits of the world
  REQUIRE(lines.size() == 4);
  CHECK(lines[1] == "rank 1: TP group [0 1] as t=1, DP group [1 3] as d=0");
  CHECK(lines[2] == "rank 2: TP group [2 3] as t=0, DP group [0 2] as d=1");
}
