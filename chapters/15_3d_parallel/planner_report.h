/// @file planner_report.h
/// @brief `--plan`: the planner's flags, its table (planner.h's predictions,
/// best first, the layouts over the budget after the others with the
/// category that overflows), and `--run-top K`: the K best layouts this
/// build can run, each trained a few steps and timed on the simulated link
/// clock, predicted next to measured with Spearman's rank correlation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "corpus.h"
#include "dpt/cli_fwd.h"
#include "dpt/lecture.h"
#include "planner.h"

/// The values of the planner's flags.
struct PlanFlags {
  bool plan = false;                     ///< --plan: print the layouts, train nothing
  double memory_mib = 0;                 ///< --memory-mib: per-rank budget (0: none)
  int nodes = 0;                         ///< --nodes K (0: 2 when the ranks are even and ≥ 4, else 1, as chapter 08)
  std::string link_intra = "nvlink";     ///< --link-intra: inside a node (chapter 08's default)
  std::string link_inter = "ethernet";   ///< --link-inter: between nodes (chapter 08's default)
  double gflops = 0;                     ///< --gflops: one rank's rate (0: measured once on this machine)
  int run_top = 0;                       ///< --run-top K: train and time the K best runnable layouts
};

/// Registers the planner's flags on `app`.
void add_plan_flags(CLI::App& app, PlanFlags& flags);

/// "" or the one sentence why the planner's flags do not fit `world` ranks
/// (--nodes must divide them; --run-top, --memory-mib, --nodes and --gflops
/// need --plan).
std::string plan_flags_problem(const PlanFlags& flags, int world);

namespace dpt::ch15 {

/// "" when this build can train `layout` (chapter 15 runs tp × dp × pp, any
/// M, with or without sp; not ZeRO), else "not runnable in this build: <why>".
std::string runnable_problem(const PlanLayout& layout);

/// Spearman's rank correlation of two equally long lists (ties get their
/// mean rank); NaN when either list has no spread.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// Trains a layout on every rank and returns its measured step, seconds on
/// the simulated link clock, the same on every rank (planner_run.h).
using PlanTrainer = std::function<double(const PlanLayout&)>;

/// Collective over the world: the plan for `model` on `machine` and
/// ctx.world ranks, printed on rank 0 (under --quiet too: it was asked for);
/// with --run-top K, the K best layouts that fit and this build can run,
/// each through `train`, and the verdict on the rank correlation.
void plan_section(ModelChapterRun& run, const PlanFlags& flags, const PlanModel& model, const PlanMachine& machine,
                  const PlanTrainer& train);

}  // namespace dpt::ch15
