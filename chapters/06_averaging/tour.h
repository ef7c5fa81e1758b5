/// @file tour.h
/// @brief Chapter 06's harness (provided, not a hole): the settings the tour
/// trains side by side, running one, its per-step metrics, and the verdicts
/// on one run computed from the spec written out here, not from the holes.
#pragma once

#include <string>
#include <vector>

#include "ch06.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "local_sgd.h"

namespace dpt::ch06 {

/// One run of the tour and what came of it (rank 0 keeps the weights).
struct Setting {
  std::string name;   ///< how the tables and metrics name it ("params H=4 momentum")
  Options o;          ///< the common flags it ran with
  Schedule schedule;  ///< what it averaged, and when
  bool written = true;  ///< false: a hole threw NotImplemented
  LocalSgdRun run;  ///< what the run measured
  std::vector<float> weights;  ///< rank 0's final parameters, flattened (Ψ,)
  Evaluation test;             ///< rank 0's replica on the held-out set
};

/// A setting: `optimizer` (Adam's at `adam_lr`), averaging gradients or
/// parameters every `every` steps after `warmup`, for `steps` steps (shown in
/// the name when it differs from base.steps).
Setting make_setting(const Options& base, const std::string& optimizer, bool parameters, int64_t every,
                     int64_t warmup, bool average_state, float adam_lr, int64_t steps);

/// Collective: trains s on a fresh replica; a hole's NotImplemented leaves
/// s.written false (and says so on rank 0). Returns the trained replica.
MLP run_setting(Context& ctx, const Dataset& data, Setting& s);

/// Per step: plain `loss` and `drift` of `main` (the flags' own setting), and
/// `loss:<setting>`, `drift:<setting>` of every setting (scripts/plot_ch06.py).
void write_metrics(const std::string& path, const std::vector<Setting>& settings, const Setting& main);

/// max |a − b| over the two settings' final weights; NaN if either is missing.
double weight_gap(const Setting& a, const Setting& b);

/// The largest value (NaN if any is NaN); 0 for none.
double max_over(const std::vector<double>& xs);

/// Verdicts on one run: averaged exactly at the steps the contract gives
/// (written out in tour.cpp, not taken from the hole), the all-reduce bytes
/// that follow from them, the same bits right after each averaging (on
/// `world` = 1 rank, where they cannot differ, it says so).
void add_run_verdicts(Verdicts& v, const Setting& s, int64_t psi, int world);

}  // namespace dpt::ch06
