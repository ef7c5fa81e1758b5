/// @file checks.h
/// @brief What chapter 11's lecture judges beside the lesson: running a part
/// past a hole not yet written (the rest runs, a ✘ names the hole), and the
/// verdicts on the training runs of section 4 (bytes, 16-bit weights,
/// skipped steps, the scale's rule, accuracy, underflow). Provided, not a hole.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dpt/holes.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "mixed_training.h"

namespace dpt::ch11 {

/// Runs the lecture's parts (on this process alone: dpt/holes.h's
/// run_here): a part that meets an unwritten hole stops, says so, and the
/// next part runs; an error is a ✘ saying what it said.
class Parts {
 public:
  /// Parts that print through `say` and judge into `v`.
  Parts(const Narrator& say, Verdicts& v) : say_(say), v_(v) {}
  /// Runs `part`; false when it stopped (NotImplemented, or a dpt::Error:
  /// then the ✘ "`what`" with the error's sentence).
  bool run(const std::function<void()>& part, const std::string& what = "the part ran to its end");
  /// No part met an unwritten hole so far.
  bool all_ran() const { return holes_.all_written(); }
  /// The verdict "every part ran (holes written)", naming what did not.
  void judge() const;

 private:
  const Narrator& say_;
  Verdicts& v_;
  Holes holes_;
};

/// Section 4's settings: fp32, bf16, fp16 with and without dynamic scaling
/// (with `compare`), then `mine` unless it is one of them; `mine_at` is its index.
std::vector<Setting> settings_to_train(const Setting& mine, bool compare, int64_t growth_interval, std::size_t& mine_at);

/// Verdicts on section 4's runs (`runs[i]` empty where a hole stopped it):
/// per run the model-state bytes, 16-bit weights, skipped steps left every
/// bit, few skips, the scale's rule; with `compared` (the four settings of
/// settings_to_train, all run) bf16's and fp16's accuracy against fp32's
/// (`accuracy`, when `scored`) and fp16's underflow with and without scaling.
void judge_training(const Options& o, const std::vector<Setting>& settings,
                    const std::vector<std::optional<MixedRun>>& runs, const std::vector<double>& accuracy,
                    bool compared, bool scored, Verdicts& v);

}  // namespace dpt::ch11
