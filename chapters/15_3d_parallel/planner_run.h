/// @file planner_run.h
/// @brief `--plan` in chapter 15's run: the model and the machine the
/// planner plans for (the flags, the text's vocabulary, a compute rate
/// measured once here unless --gflops gives it), and --run-top's trainer:
/// one layout trained a few steps, its step timed on the simulated link
/// clock — the wall time of its steps, plus each collective the run's
/// traffic logs recorded charged at the link model's ring cost on the link
/// its group crosses.
#pragma once

#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/lecture.h"
#include "planner.h"

namespace dpt::ch15 {

/// The planner's model: the flags' shape with the text's vocabulary, --batch,
/// the optimizer.
PlanModel plan_model_of(const Ch15Flags& f);

/// Collective over the world: the planner's machine on ctx.world ranks
/// (--nodes, --link-intra, --link-inter, --gflops or a rate rank 0 measures
/// and sends to all, so every rank ranks the layouts alike).
PlanMachine plan_machine_of(Context& ctx, const PlanFlags& flags);

/// Collective over the world: --plan (planner_report.h), trained layouts
/// through train_tensor_parallel_gpt on `text`.
void run_plan(ModelChapterRun& run, const Ch15Flags& f, const Corpus& text);

}  // namespace dpt::ch15
