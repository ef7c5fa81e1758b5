// verdict.cpp — ✔/✘ lines computed from a run's numbers.
#include "dpt/verdict.h"

#include <cmath>

#include "dpt/check.h"
#include "dpt/report.h"

namespace dpt {

namespace {

std::string number(double value) { return std::isnan(value) ? "nan" : fmt(value, 3); }

// A measured value that is nan or inf is not a measurement that missed its
// bound: the run itself produced non-finite numbers, and the line says so.
std::string measured(double value) {
  return std::isfinite(value) ? number(value) : number(value) + " (the run produced non-finite values)";
}

// A bound computed from the run's numbers can overflow too; "<= inf" would
// pass anything, so such a bound fails and says why.
std::string bound(const std::string& relation, double value) {
  return relation + number(value) + (std::isfinite(value) ? "" : ", a bound that is not finite: the numbers it is computed from overflowed");
}

}  // namespace

// ----------------------------------------------------------------------------
// the checks: every comparison is written so that NaN makes it false

void Verdicts::at_most(const std::string& what, double value, double tolerance, const std::string& why) {
  bool ok = std::isfinite(value) && std::isfinite(tolerance) && value <= tolerance;
  verdicts_.push_back({what, measured(value), bound("<= ", tolerance), why, ok});
}

void Verdicts::at_least(const std::string& what, double value, double bound, const std::string& why) {
  bool ok = !std::isnan(value) && value >= bound;
  verdicts_.push_back({what, measured(value), ">= " + number(bound), why, ok});
}

void Verdicts::near(const std::string& what, double measured, double expected, double tolerance,
                    const std::string& why) {
  double scale = std::max(1.0, std::fabs(expected));
  bool ok = std::isfinite(measured) && std::fabs(measured - expected) <= tolerance * scale;
  verdicts_.push_back({what, dpt::measured(measured), "= " + number(expected) + " ± " + number(tolerance * scale), why, ok});
}

void Verdicts::holds(const std::string& what, bool ok, const std::string& seen) {
  verdicts_.push_back({what, "", "", seen, ok});
}

void Verdicts::cannot_fail(const std::string& what, const std::string& why) {
  Verdict v{what, "", "", why, true};
  v.vacuous = true;
  verdicts_.push_back(v);
}

void Verdicts::report(const std::string& what, double value, const std::string& why) {
  Verdict v{what, number(value), "", why, true};
  v.reported = true;
  verdicts_.push_back(v);
}

int Verdicts::vacuous() const {
  int count = 0;
  for (const auto& v : verdicts_) count += v.vacuous ? 1 : 0;
  return count;
}

std::string on_one_rank(int64_t try_ranks) { return "on 1 rank (try --ranks " + std::to_string(try_ranks) + ")"; }

int Verdicts::failures() const {
  int failed = 0;
  for (const auto& v : verdicts_) failed += v.passed ? 0 : 1;
  return failed;
}

// ----------------------------------------------------------------------------
// printing

void Verdicts::print(std::ostream& out) const {
  out << "\n-- verdicts " << std::string(60, '-') << "\n";
  for (const auto& v : verdicts_) {
    if (v.vacuous) {
      out << "  \u2014 " << v.what << " \u2014 cannot fail " << v.why << "\n";
      continue;
    }
    if (v.reported) {
      out << "  · " << v.what << ": " << v.measured << " — " << v.why << "\n";
      continue;
    }
    out << (v.passed ? "  \u2714 " : "  \u2718 ") << v.what;
    if (!v.measured.empty()) out << ": " << v.measured;
    if (!v.bound.empty()) out << " (expected " << v.bound << ")";
    if (!v.why.empty()) out << " — " << v.why;
    out << "\n";
  }
  int failed = failures(), idle = vacuous(), reported = 0;
  for (const auto& v : verdicts_) reported += v.reported ? 1 : 0;
  size_t able = verdicts_.size() - size_t(idle) - size_t(reported);  // checks that could have failed
  std::string also = idle == 0 ? "" : "; " + std::to_string(idle) + " could not fail on this run's shape";
  if (verdicts_.empty())
    out << "  \u2718 no checks ran\n";
  else if (able == 0)
    out << "  no check could fail on this run's shape (" << idle << " listed above)\n";
  else if (failed == 0)
    out << "  all " << able << " checks passed" << also << "\n";
  else
    out << "  " << failed << " of " << able << " checks FAILED" << also << "\n";
}

void require_finite_loss(double loss, int64_t step, double lr) {
  if (std::isfinite(loss)) return;
  throw Error("training diverged at step " + std::to_string(step) + ": the loss is " +
              (std::isnan(loss) ? std::string("nan") : std::string(loss > 0 ? "inf" : "-inf")) +
              " (learning rate " + fmt(lr, 3) + "; try a smaller --lr)");
}

}  // namespace dpt
