// ch15_flags.cpp — chapter 15's flags and the layout check (ch15_flags.h).
#include "ch15_flags.h"

#include <CLI/CLI.hpp>
#include <vector>

#include "dpt/grid.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "tp_gpt.h"

/// A bare run's ranks: tp 2 × dp 2, so both axes' verdicts can fail.
constexpr int kBareRanks = 4;

Ch15Layout ch15_layout(const Ch15Flags& f, int world) {
  Ch15Layout out;
  const int P = f.pp;
  // The ranks one pipeline stage's TP and DP groups share out (all of them with --pp 1).
  const std::string rest = P == 1 ? dpt::ranks_phrase(world) : dpt::ranks_phrase(world) + " over --pp " + std::to_string(P);
  if (world % P != 0) {
    out.problem = "--pp " + std::to_string(P) + " does not divide the " + dpt::ranks_phrase(world);
    return out;
  }
  const int left = world / P;
  // Neither --tp nor --dp: tp 2 where the ranks left are even (TP is the lesson), else 1.
  const int tp_flag = f.tp > 0 ? f.tp : f.dp > 0 ? 0 : left % 2 == 0 ? 2 : 1;
  std::vector<dpt::GridAxis> axes = {{"tp", tp_flag, "--tp"}, {"dp", f.dp, "--dp"}};
  if (P != 1) axes.push_back({"pp", P, "--pp"});  // named in the sentence only when asked for
  if (tp_flag > 0 && f.dp > 0)
    out.problem = dpt::grid_problem(axes, world);
  else if (tp_flag > 0 && left % tp_flag != 0)
    out.problem = "--tp " + std::to_string(tp_flag) + " does not divide the " + rest;
  else if (f.dp > 0 && left % f.dp != 0)
    out.problem = "--dp " + std::to_string(f.dp) + " does not divide the " + rest;
  if (!out.problem.empty()) return out;
  out.tp = tp_flag > 0 ? tp_flag : left / f.dp;
  out.dp = left / out.tp;
  out.pp = P;
  out.micro_batches = f.micro_batches > 0 ? f.micro_batches : P;
  const std::string M = f.micro_batches > 0 ? "--micro-batches " + std::to_string(out.micro_batches)
                                            : "--micro-batches (default --pp, " + std::to_string(out.micro_batches) + ")";
  out.problem = dpt::ch15::tp_shape_problem(f.lm.shape, out.tp);
  if (!out.problem.empty()) return out;
  if (P > f.lm.shape.layers)
    out.problem = "--pp " + std::to_string(P) + " exceeds the " + std::to_string(f.lm.shape.layers) +
                  " blocks (--layers): each stage holds at least one";
  else if (f.lm.batch % out.micro_batches != 0)
    out.problem = M + " does not divide the batch of " + std::to_string(f.lm.batch) +
                  " sequences (--batch): the micro-batches are equal";
  else if (f.sp && out.tp == 1)
    out.problem = "--sp needs --tp 2 or more: it splits the sequence over the TP group, here of 1 rank";
  else if (f.sp && f.lm.shape.context % out.tp != 0)
    out.problem = "--sp: --tp " + std::to_string(out.tp) + " does not divide the context of " +
                  std::to_string(f.lm.shape.context) + " positions (--context): each rank holds an equal share";
  return out;
}

void add_ch15_flags(CLI::App& app, Ch15Flags& f) {
  // Seconds, not minutes, for a bare run on a 2-core machine: chapter 14's
  // model at half its depth and width, a shorter context, a few steps.
  f.lm.shape.layers = 2, f.lm.shape.heads = 4, f.lm.shape.width = 64, f.lm.shape.context = 32;
  f.lm.batch = 4, f.lm.steps = 30, f.lm.eval_every = 15, f.lm.eval_batches = 2, f.lm.sample = 0;
  add_ch14_flags(app, f.lm);
  app.add_option("--tp", f.tp, "Ranks that split each block (tensor parallel; default 2 where ranks / --pp is even, else 1)")
      ->check(dpt::integer_in(1, dpt::kMaxRanks));
  app.add_option("--dp", f.dp, "Copies of the pipeline, data parallel (default: ranks / (--tp x --pp))")
      ->check(dpt::integer_in(1, dpt::kMaxRanks));
  app.add_option("--pp", f.pp, "Pipeline stages: the blocks split by depth, embeddings first, head last (default 1)")
      ->check(dpt::integer_in(1, dpt::kMaxRanks));
  app.add_option("--micro-batches", f.micro_batches, "Micro-batches per step on each pipeline (default: --pp)")
      ->check(dpt::integer_in(1, 1 << 20));
  app.add_option("--schedule", f.schedule, "Chapter 13's pipeline schedule: 1f1b or gpipe")
      ->check(CLI::IsMember({"1f1b", "gpipe"}))->capture_default_str();
  app.add_flag("--sp", f.sp, "Sequence parallel: between the split layers each TP rank holds context / tp positions");
  app.add_flag("--check-groups", f.check_groups, "Print every rank's coordinates and TP, DP and PP groups (always checked)");
  add_plan_flags(app, f.plan);
  dpt::ch15::add_step_chart_flags(app, f.chart);
  app.final_callback([&f, &app] {  // once --ranks and the sizes are known: exit 2 with a sentence
    const std::string comm = app.get_option("--comm")->as<std::string>();
    const CLI::Option* ranks = app.get_option("--ranks");
    const int world = comm != "threads" ? dpt::detect_process_environment().world
                                        : ranks->count() ? ranks->as<int>() : kBareRanks;
    const Ch15Layout l = ch15_layout(f, world);
    if (!l.problem.empty()) throw CLI::ValidationError(l.problem);
    if (const std::string p = plan_flags_problem(f.plan, world); !p.empty()) throw CLI::ValidationError(p);
    const std::string chart = dpt::ch15::step_chart_problem(f.chart, world, f.lm.steps);
    if (!chart.empty()) throw CLI::ValidationError(chart);
  });
}
