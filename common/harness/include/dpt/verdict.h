/// @file verdict.h
/// @brief The closing lines of every chapter: checks computed from the run's
/// own numbers against stated tolerances, printed as ✔/✘, never reassurance.
///
///     Verdicts v;
///     v.at_most("max |w - w_single-device|", diff, 1e-5, "float sums in another order");
///     v.holds("each rank sends only to its right neighbour", right_only, matrix_summary);
///     if (world == 1) v.cannot_fail("ranks agree", on_one_rank(4));   // "—", never ✔
///     v.print(std::cout);          // ✔/✘ per line, then "all 3 checks passed"
///     return v.exit_code();        // 0, or kVerdictFailed when any check failed
///
/// A NaN (or infinity) never passes: `at_most(x, NaN, tol)` fails, because a
/// NaN is the largest difference there is, not a difference of 0; its line
/// says the run produced non-finite values. An at_most bound that is not
/// finite (computed from numbers that overflowed) fails too, and says so.
///
/// Exit codes a chapter program uses: 0 every check passed, 1 an error stopped
/// the run, 2 a bad flag, kVerdictFailed (3) the run finished but a check on
/// its numbers failed.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace dpt {

/// A chapter's exit code when it ran to the end but a verdict failed.
constexpr int kVerdictFailed = 3;

/// One verdict line: what was checked, the number, the bound, and the outcome.
struct Verdict {
  std::string what;      ///< "max |w - w_single-device|"
  std::string measured;  ///< the number as printed ("3.1e-07", or "nan")
  std::string bound;     ///< the tolerance as printed ("<= 1e-05"); "" for holds()
  std::string why;       ///< why this tolerance, or what was seen (may be "")
  bool passed = false;   ///< the outcome
  bool vacuous = false;  ///< could not fail on this run's shape (printed "—", not ✔); passed is true
  bool reported = false; ///< a measured number, not a check (printed "·", never ✔/✘); passed is true
};

/// An ordered list of verdicts for one run.
class Verdicts {
 public:
  /// Passes when value <= tolerance (NaN and +inf fail). `why` argues the
  /// tolerance ("float sums in another order: ~1e-7 per step").
  void at_most(const std::string& what, double value, double tolerance, const std::string& why = "");
  /// Passes when value >= bound (NaN fails).
  void at_least(const std::string& what, double value, double bound, const std::string& why = "");
  /// Passes when |measured - expected| <= tolerance·max(1, |expected|) (NaN fails).
  void near(const std::string& what, double measured, double expected, double tolerance,
            const std::string& why = "");
  /// Passes when `ok`; `seen` says what the numbers showed either way.
  void holds(const std::string& what, bool ok, const std::string& seen = "");
  /// A check this run's shape cannot fail (one rank has nobody to disagree
  /// with): printed "— what — cannot fail <why>", never ✔, and not counted
  /// among the checks that passed. `why` says how to make it able to fail
  /// (on_one_rank(4): "on 1 rank (try --ranks 4)").
  void cannot_fail(const std::string& what, const std::string& why);
  /// A number the run measured that no tolerance judges (a gap the lesson
  /// expects, such as per-rank batch norm's): printed "· what: value — why",
  /// never ✔ or ✘, not counted among the checks, no effect on the exit code.
  void report(const std::string& what, double value, const std::string& why);

  /// The verdicts so far, in order.
  const std::vector<Verdict>& all() const { return verdicts_; }
  /// Number of failed verdicts.
  int failures() const;
  /// Number of verdicts that could not fail on this run's shape.
  int vacuous() const;
  /// True when there is at least one verdict and none failed.
  bool all_passed() const { return !verdicts_.empty() && failures() == 0; }
  /// Prints a "verdicts" banner, one ✔/✘ line each, and a count line.
  void print(std::ostream& out) const;
  /// 0 when all passed, kVerdictFailed otherwise (also when empty: a run that
  /// checked nothing has not shown anything).
  int exit_code() const { return all_passed() ? 0 : kVerdictFailed; }

 private:
  std::vector<Verdict> verdicts_;
};

/// "on 1 rank (try --ranks N)": why a distributed check cannot fail on one
/// rank, and the rank count that makes it able to.
std::string on_one_rank(int64_t try_ranks);

/// Throws dpt::Error when `loss` is NaN or infinite: "training diverged at step
/// S: loss is nan (… lower --lr)". Called every step by every training loop,
/// so a diverged run stops with a sentence instead of printing -nan to the end.
void require_finite_loss(double loss, int64_t step, double lr);

}  // namespace dpt
