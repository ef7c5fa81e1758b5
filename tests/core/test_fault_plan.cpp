// test_fault_plan.cpp — --fail and --join: each value's form, who is in the
// run at each step, and a plan that does not fit the run refused in one
// sentence naming the flag value.
#include "support/catch.h"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/fault_plan.h"

using namespace dpt;

namespace {
FaultPlan plan_of(std::vector<std::string> fail, std::vector<std::string> join = {}) {
  FaultFlags flags;
  flags.fail = std::move(fail), flags.join = std::move(join);
  return FaultPlan(flags);
}

// The sentence parse_fault_event refuses `value` with ("" when it parses).
std::string refusal_of(const std::string& value, bool join) {
  try {
    parse_fault_event(value, join);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("fault plan: each form parses to its rank, step, kind and factor", "[fault_plan]") {
  FaultEvent crash = parse_fault_event("2@5", false);
  CHECK(crash.rank == 2);
  CHECK(crash.step == 5);
  CHECK(crash.kind == FaultKind::Crash);
  CHECK(crash.flag == "--fail 2@5");
  CHECK(parse_fault_event("1@3:freeze", false).kind == FaultKind::Freeze);
  CHECK(parse_fault_event("0@6:bitflip", false).kind == FaultKind::BitFlip);
  FaultEvent slow = parse_fault_event("3@4:slow:8", false);
  CHECK(slow.kind == FaultKind::Slow);
  CHECK(slow.factor == 8);
  CHECK(parse_fault_event("3@4:slow", false).factor == 4);
  FaultEvent join = parse_fault_event("2@9", true);
  CHECK(join.kind == FaultKind::Join);
  CHECK(join.flag == "--join 2@9");
}

TEST_CASE("fault plan: a malformed value says what the value must look like", "[fault_plan]") {
  for (const char* bad : {"2", "a@5", "2@", "@5", "-1@5", "2@5:melt", "2@5:slow:1", "2@5:slow:x",
                                 "2@5:crash:3", "2@5:", "99999@1"})
    CHECK_THAT(refusal_of(bad, false), contains_text("expects RANK@STEP[:crash|freeze|slow[:FACTOR]|bitflip]"));
  CHECK_THAT(refusal_of("2@9:crash", true), contains_text("expects RANK@STEP"));
  CHECK_THAT(refusal_of("2@5:melt", false), contains_text("unknown kind 'melt'"));
  CHECK(refusal_of("2@9", true).empty());
}

TEST_CASE("fault plan: the flags are repeatable and checked at parse time", "[fault_plan]") {
  CLI::App app;
  FaultFlags flags;
  add_fault_flags(app, flags);
  app.parse(std::vector<std::string>{"2@9", "--join", "1@3:freeze", "--fail", "2@5", "--fail"});  // reversed argv
  CHECK(flags.fail == std::vector<std::string>{"2@5", "1@3:freeze"});
  CHECK(flags.join == std::vector<std::string>{"2@9"});
  CLI::App bad;
  FaultFlags ignored;
  add_fault_flags(bad, ignored);
  CHECK_THROWS_AS(bad.parse(std::vector<std::string>{"2@5:melt", "--fail"}), CLI::ValidationError);
}

TEST_CASE("fault plan: a rank is out from its crash or freeze until its join, a spare until its join",
          "[fault_plan]") {
  const FaultPlan plan = plan_of({"2@5", "1@3:freeze", "0@4:slow:3"}, {"2@9", "3@4"});
  for (int64_t s = 0; s < 12; ++s) {
    CAPTURE(s);
    CHECK(plan.in_run(0, s));
    CHECK(plan.in_run(1, s) == (s < 3));
    CHECK(plan.in_run(2, s) == (s < 5 || s >= 9));
    CHECK(plan.in_run(3, s) == (s >= 4));
    CHECK(plan.slowdown(0, s) == (s >= 4 ? 3 : 1));
  }
  REQUIRE(plan.at(2, 5) != nullptr);
  CHECK(plan.at(2, 5)->kind == FaultKind::Crash);
  CHECK(plan.at(2, 6) == nullptr);
  const std::vector<FaultEvent> at4 = plan.at_step(4);
  REQUIRE(at4.size() == 2);
  CHECK(at4[0].rank == 0);
  CHECK(at4[1].rank == 3);
  CHECK(fault_plan_problem(plan, 4, 12).empty());
  CHECK(plan_of({}).empty());
}

TEST_CASE("fault plan: a plan that does not fit the run is one sentence naming the value", "[fault_plan]") {
  CHECK(fault_plan_problem(plan_of({"4@1"}), 4, 10) == "--fail 4@1: rank 4, but the run has 4 ranks (0 to 3)");
  CHECK(fault_plan_problem(plan_of({"1@10"}), 4, 10) == "--fail 1@10: step 10, but the run has 10 steps (0 to 9)");
  CHECK_THAT(fault_plan_problem(plan_of({"1@3", "1@3:slow"}), 4, 10), contains_text("one event per rank per step"));
  CHECK_THAT(fault_plan_problem(plan_of({"1@3:slow"}, {"1@5"}), 4, 10),
             contains_text("--join 1@5: rank 1 is in the run then"));
  CHECK_THAT(fault_plan_problem(plan_of({"1@3", "1@5:bitflip"}), 4, 10),
             contains_text("--fail 1@5:bitflip: rank 1 is out of the run then (after --fail 1@3)"));
  CHECK_THAT(fault_plan_problem(plan_of({"0@2", "1@4:freeze"}), 2, 10),
             contains_text("no rank is left in the run at step 4"));
  CHECK(fault_plan_problem(plan_of({"0@2", "1@4:freeze"}, {"0@4"}), 2, 10).empty());  // 0 is back as 1 leaves
}
