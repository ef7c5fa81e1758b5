// test_verdict.cpp — verdicts never pass a NaN; max_abs_diff never hides one.
#include <cmath>
#include <limits>
#include <sstream>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/ops.h"
#include "dpt/verdict.h"
#include "support/catch.h"

using namespace dpt;

static const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST_CASE("max_abs_diff reports a NaN anywhere as NaN, not 0", "[verdict]") {
  Tensor a = Tensor::zeros({4}, Device::host()), b = Tensor::zeros({4}, Device::host());
  CHECK(max_abs_diff(a, b) == 0.0f);
  b.data()[2] = 0.5f;
  CHECK(max_abs_diff(a, b) == 0.5f);
  a.data()[1] = std::numeric_limits<float>::quiet_NaN();  // before the 0.5
  CHECK(std::isnan(max_abs_diff(a, b)));
  Tensor c = Tensor::zeros({3}, Device::host()), d = Tensor::zeros({3}, Device::host());
  d.data()[2] = std::numeric_limits<float>::quiet_NaN();  // the last element
  CHECK(std::isnan(max_abs_diff(c, d)));
}

TEST_CASE("a verdict on NaN or infinity fails, whatever its bound", "[verdict]") {
  Verdicts v;
  v.at_most("nan diff", kNaN, 1e30);
  v.at_most("inf diff", std::numeric_limits<double>::infinity(), 1e30);
  v.at_least("nan accuracy", kNaN, -1e30);
  v.near("nan bytes", kNaN, 0.0, 1e30);
  for (const auto& verdict : v.all()) CHECK_FALSE(verdict.passed);
  CHECK(v.failures() == 4);
  CHECK(v.exit_code() == kVerdictFailed);
}

TEST_CASE("a non-finite value says the run produced it, and a bound that overflowed fails and says so", "[verdict]") {
  Verdicts v;
  v.at_most("gap", kNaN, 1e-5);
  v.at_most("gap within an overflowed bound", 0.5, std::numeric_limits<double>::infinity());
  std::ostringstream out;
  v.print(out);
  CHECK(v.failures() == 2);  // "0.5 <= inf" would pass anything
  CHECK_THAT(out.str(), contains_text("gap: nan (the run produced non-finite values)"));
  CHECK_THAT(out.str(), contains_text("a bound that is not finite: the numbers it is computed from overflowed"));
}

TEST_CASE("verdicts pass and fail at their stated bounds", "[verdict]") {
  Verdicts v;
  v.at_most("equal to tolerance", 1e-5, 1e-5);
  v.at_least("at the bound", 0.9, 0.9);
  v.near("relative to the expected value", 1005.0, 1000.0, 0.01);  // 5 <= 0.01*1000
  v.holds("a fact", true, "seen");
  CHECK(v.all_passed());
  CHECK(v.exit_code() == 0);
  v.at_most("just above", 1.01e-5, 1e-5);
  v.near("outside", 1011.0, 1000.0, 0.01);
  CHECK(v.failures() == 2);
  std::ostringstream out;
  v.print(out);
  CHECK_THAT(out.str(), contains_text("\u2718 just above: 1.01e-05 (expected <= 1e-05)") &&
                            contains_text("2 of 6 checks FAILED"));
}

TEST_CASE("a run that checked nothing has not passed", "[verdict]") {
  Verdicts v;
  CHECK_FALSE(v.all_passed());
  CHECK(v.exit_code() == kVerdictFailed);
}

TEST_CASE("a non-finite loss stops training with a sentence naming the step", "[verdict]") {
  CHECK_NOTHROW(require_finite_loss(2.3, 0, 0.05));
  CHECK_THROWS_WITH(require_finite_loss(kNaN, 12, 5.0), contains_text("diverged at step 12") && contains_text("nan") &&
                                                            contains_text("--lr"));
  CHECK_THROWS_AS(require_finite_loss(-std::numeric_limits<double>::infinity(), 3, 0.1), Error);
}

TEST_CASE("a check that cannot fail on the run's shape prints a dash, never a tick", "[verdict]") {
  Verdicts v;
  v.holds("a fact", true, "seen");
  v.cannot_fail("ranks hold the same weights", on_one_rank(4));
  CHECK(v.all_passed());
  CHECK(v.vacuous() == 1);
  std::ostringstream out;
  v.print(out);
  CHECK_THAT(out.str(), contains_text("\u2014 ranks hold the same weights \u2014 cannot fail on 1 rank (try --ranks 4)") &&
                            contains_text("all 1 checks passed; 1 could not fail on this run's shape") &&
                            !contains_text("\u2714 ranks hold"));
  v.holds("a broken fact", false, "");
  std::ostringstream failed;
  v.print(failed);
  CHECK_THAT(failed.str(), contains_text("1 of 2 checks FAILED; 1 could not fail"));
  Verdicts only_vacuous;
  only_vacuous.cannot_fail("ranks agree", on_one_rank(2));
  std::ostringstream none;
  only_vacuous.print(none);
  CHECK_THAT(none.str(), contains_text("no check could fail on this run's shape"));
  CHECK(only_vacuous.exit_code() == 0);
}
