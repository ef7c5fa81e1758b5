/// @file ch15_flags.h
/// @brief Chapter 15's flags: chapter 14's (the model, the data, training,
/// what to write) with smaller defaults, and the layout: --tp, --dp, --pp,
/// --micro-batches, --schedule, --sp, --check-groups.
#pragma once

#include <string>

#include "ch14_flags.h"
#include "dpt/cli_fwd.h"
#include "planner_report.h"
#include "step_chart.h"

/// The values of ch15's flags.
struct Ch15Flags {
  Ch14Flags lm;               ///< chapter 14's flags; --batch is per model (per DP replica)
  int tp = 0;                 ///< ranks that split each block (0: 2 where ranks / pp is even, else 1)
  int dp = 0;                 ///< pipeline replicas (0: ranks / (tp · pp))
  bool check_groups = false;  ///< print every rank's coordinates and groups
  bool sp = false;            ///< sequence parallel inside each TP group (needs tp > 1)
  int pp = 1;                 ///< pipeline stages: the blocks split by depth
  int micro_batches = 0;      ///< micro-batches per step on each pipeline (0: pp)
  std::string schedule = "1f1b";  ///< chapter 13's schedule: "1f1b" or "gpipe"
  PlanFlags plan;             ///< --plan and its flags (planner_report.h)
  dpt::ch15::StepChartFlags chart;  ///< --gantt, --gantt-step, --slow-rank, --slowdown (step_chart.h)
};

/// The layout the flags give on `world` ranks.
struct Ch15Layout {
  int tp = 1;           ///< ranks that split each block
  int dp = 1;           ///< pipeline replicas; tp · dp · pp = world when `problem` is ""
  int pp = 1;           ///< pipeline stages
  int micro_batches = 1;  ///< micro-batches per step on each pipeline
  std::string problem;  ///< "" or the sentence why the layout does not fit (the flag named)
};

/// tp, dp and pp from --tp/--dp/--pp on `world` ranks, checked against the
/// ranks and the model: tp must divide the heads; pp must not exceed the
/// layers (an uneven split is allowed, as chapter 13's); the micro-batches
/// must divide --batch; with --sp, tp > 1 must divide the context.
Ch15Layout ch15_layout(const Ch15Flags& f, int world);

/// Registers the flags on `app`, writing into `flags`; the layout is
/// checked once --ranks is known (one sentence, exit 2).
void add_ch15_flags(CLI::App& app, Ch15Flags& flags);
