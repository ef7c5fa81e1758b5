// batch_sweep.cpp — the batch sweep's runs (batch_sweep.h): for each batch,
// the grid search for the rate that reaches the target in the fewest steps,
// the linear rule with warm-up from the smallest batch's rate, the tables,
// the plot and the verdicts.
#include "batch_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>

#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/output_file.h"
#include "sweep_compare.h"
#include "sweep_plot.h"

namespace dpt::ch02 {

namespace {

/// A run's outcome and the model it trained.
struct Trained {
  TargetRun run;
  MLP model;
};

// One run from the flags' initial weights: batches of `batch` from the
// seeded sample stream, rate lr_at(step), until the target (run_to_target).
Trained train_to_target(const Options& o, Device& device, const Dataset& data, const Dataset& eval, int64_t batch,
                        const std::function<float(int64_t)>& lr_at, double target, int64_t max_steps) {
  MLP model = build_model(o, device);
  auto optimizer = make_optimizer(o.optimizer, model.parameters(), lr_at(0));
  BatchSampler sampler(data.size(), batch, !o.no_shuffle, o.seed);
  int64_t step = 0;
  auto one_step = [&] {
    optimizer->lr = lr_at(step);
    Batch b = gather_batch(data, sampler.indices(step++), device);
    optimizer->zero_grad();
    Tensor loss = softmax_cross_entropy(model.forward(b.x), b.y);
    loss.backward();
    optimizer->step();
    return loss.item();
  };
  auto accuracy = [&] { return evaluate(model, eval).accuracy; };
  return {run_to_target(one_step, accuracy, target, max_steps), model};
}

// A table cell for one run: its steps, "div" (diverged), ">N" (stopped at
// the cap N without reaching the target), "-" (not tried).
std::string cell(const TargetRun* r) {
  if (r == nullptr) return "-";
  if (r->diverged) return "div";
  if (!r->reached()) return ">" + std::to_string(r->steps_taken);
  return std::to_string(r->steps);
}

/// One batch's grid search: each rate's run (null: not tried), the best index.
struct Search {
  std::vector<std::optional<TargetRun>> runs;
  int best = -1;
  std::optional<MLP> best_model;
};

// The grid search at one batch. It starts at `start` and walks up the grid
// while each rate does better (fewer steps to the target, or the first to
// reach it), else down from `start`: steps to the target are taken to be
// unimodal in the rate, which the printed grid lets a reader check. Each run
// stops at the best steps so far, so a worse rate costs no more than the best.
Search search_grid(const Options& o, Device& device, const Dataset& data, const Dataset& eval, int64_t batch,
                   const std::vector<float>& grid, int start, const SweepFlags& flags) {
  Search s;
  s.runs.resize(grid.size());
  auto attempt = [&](int i) {
    const int64_t cap = s.best < 0 ? flags.max_steps : std::min(flags.max_steps, s.runs[s.best]->steps);
    const float lr = grid[i];
    Trained t = train_to_target(o, device, data, eval, batch, [lr](int64_t) { return lr; }, flags.target, cap);
    s.runs[i] = t.run;
    const bool better = t.run.reached() && (s.best < 0 || t.run.steps < s.runs[s.best]->steps);
    if (better) s.best = i, s.best_model = t.model;
    return better;
  };
  attempt(start);
  int i = start + 1;
  while (i < int(grid.size()) && attempt(i)) ++i;
  if (i == start + 1) {  // the first rate up did no better: walk down instead
    i = start - 1;
    while (i >= 0 && attempt(i)) --i;
  }
  return s;
}

// The first kSweepEvalSamples samples of the held-out set, as their own data set.
Dataset eval_subset(const Dataset& held_out) {
  const int64_t n = std::min(kSweepEvalSamples, held_out.size());
  return {held_out.x.rows(0, n).clone(), std::vector<int64_t>(held_out.y.begin(), held_out.y.begin() + n),
          held_out.classes};
}

// The two tables: every rate tried at every batch, then the curve; and the knee.
void print_tables(const SweepResult& sweep, const std::vector<Search>& searches, const std::vector<float>& grid,
                  double target, const std::string& optimizer, const Narrator& say) {
  std::vector<std::string> headers = {"B"};
  for (float lr : grid) headers.push_back("lr " + fmt(lr, 3));
  Table runs("steps to " + fixed(100 * target, 1) + "% at each rate tried (div: diverged; >N: stopped at N; -: not tried)",
             headers);
  Table table("steps to the target against the global batch, " + optimizer,
              {"B", "tuned lr", "steps", "samples", "linear lr", "linear steps", "linear samples"});
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const SweepPoint& p = sweep.points[i];
    std::vector<std::string> row = {std::to_string(p.batch)};
    for (const auto& r : searches[i].runs) row.push_back(cell(r ? &*r : nullptr));
    runs.add_row(row);
    auto samples = [&](int64_t steps) { return steps > 0 ? std::to_string(steps * p.batch) : std::string("-"); };
    table.add_row({std::to_string(p.batch), p.tuned_steps > 0 ? fmt(p.tuned_lr, 3) : "-",
                   p.tuned_steps > 0 ? std::to_string(p.tuned_steps) : "not reached", samples(p.tuned_steps),
                   fmt(p.linear_lr, 3), p.linear_diverged ? "diverged" : p.linear_steps > 0 ? std::to_string(p.linear_steps) : "not reached",
                   samples(p.linear_steps)});
  }
  if (say.enabled()) runs.print(std::cout);
  table.print(std::cout);
  std::cout << " S_min = " << fmt(sweep.knee.min_steps, 4) << " steps, E_min = " << fmt(sweep.knee.min_samples, 4)
            << " samples, critical batch E_min / S_min = " << fmt(sweep.knee.critical_batch, 4) << "; sweep took "
            << fixed(sweep.seconds, 0) << " s\n";
}

}  // namespace

SweepResult run_batch_sweep(Lecture& lec, const SweepFlags& flags, const std::string& optimizer) {
  Options o = lec.o;
  if (!optimizer.empty()) o.optimizer = optimizer;
  const Narrator& say = lec.say;
  const auto start_time = std::chrono::steady_clock::now();
  const Dataset eval = eval_subset(lec.held_out().data);
  const std::vector<float> grid = learning_rate_grid(o.optimizer);
  std::string grid_text;
  for (float lr : grid) grid_text += (grid_text.empty() ? "" : " ") + fmt(lr, 3);
  say.say(str("target: ", fixed(100 * flags.target, 1), "% on the first ", eval.size(), " held-out samples, evaluated after\n"
              "steps 1..16, then every ~9 %; no run past ", flags.max_steps, " steps. ", o.optimizer,
              "'s rate grid: ", grid_text, ".\n"
              "Linear rule: the smallest batch's tuned rate times B/", kSweepMinBatch, ", ramped up from it over the first ",
              flags.warmup_samples, " samples (warm-up)."));

  SweepResult sweep;
  std::vector<Search> searches;
  int start = 1;  // the first batch's search starts at the grid's second rate
  for (int64_t batch = kSweepMinBatch; batch <= flags.max_batch; batch *= 2) {
    Search s = search_grid(o, lec.device(), lec.data, eval, batch, grid, start, flags);
    SweepPoint p;
    p.batch = batch;
    if (s.best >= 0) p.tuned_steps = s.runs[s.best]->steps, p.tuned_lr = grid[s.best];
    if (batch == kSweepMinBatch) sweep.reference_lr = p.tuned_lr;
    if (sweep.reference_lr > 0) {  // the linear rule, ramped from the reference rate
      const float reference = sweep.reference_lr;
      const int64_t warmup = flags.warmup_samples;
      auto lr_at = [=](int64_t step) { return linear_rule_lr(reference, batch, warmup, step); };
      const int64_t cap = p.tuned_steps > 0 ? std::min(flags.max_steps, kLinearStepsAllowance * p.tuned_steps) : flags.max_steps;
      const TargetRun linear = train_to_target(o, lec.device(), lec.data, eval, batch, lr_at, flags.target, cap).run;
      p.linear_lr = linear_rule_lr(reference, batch, warmup, flags.max_steps), p.linear_steps = linear.steps, p.linear_diverged = linear.diverged;
      p.linear_end = linear;
    }
    say.say(str("B = ", batch, ": tuned ", p.tuned_steps > 0 ? std::to_string(p.tuned_steps) + " steps at lr " + fmt(p.tuned_lr, 3)
                                                              : std::string("not reached"),
                "; linear rule ", p.linear_diverged ? std::string("diverged")
                                  : p.linear_steps > 0 ? std::to_string(p.linear_steps) + " steps" : std::string("not reached"),
                " (", fixed(seconds_since(start_time), 0), " s so far)"));
    if (s.best >= 0) start = std::min(int(grid.size()) - 1, s.best + 1);  // twice the batch: try twice the rate first
    sweep.points.push_back(p);
    searches.push_back(std::move(s));
  }
  sweep.knee = critical_batch(sweep.points);
  sweep.seconds = seconds_since(start_time);

  print_tables(sweep, searches, grid, flags.target, o.optimizer, say);
  if (!flags.plot.empty())
    write_output_file(flags.plot, sweep_svg(sweep, "ch02: steps to " + fixed(100 * flags.target, 1) + "% held-out accuracy, " +
                                                       o.optimizer + ", MLP " + o.model));
  // The lecture's model: the tuned run at the batch nearest the critical one (log scale).
  int keep = -1;
  double keep_distance = INFINITY;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const double distance = std::abs(std::log2(double(sweep.points[i].batch) / sweep.knee.critical_batch));
    if (searches[i].best_model && (keep < 0 || distance < keep_distance)) keep = int(i), keep_distance = distance;
  }
  // Beside --sweep-optimizers, the first (plain) optimizer's run is the one kept.
  const bool keeps = flags.optimizers.empty() || parse_sweep_optimizers(flags.optimizers).front() == o.optimizer;
  if (keep >= 0 && keeps) {
    lec.keep(*searches[keep].best_model);
    lec.summary.add_row({"the model scored below", "the tuned " + o.optimizer + " run at B = " +
                                                       std::to_string(sweep.points[keep].batch)});
  }
  add_sweep_verdicts(lec.verdicts, sweep, optimizer.empty() ? "" : optimizer + ": ");
  return sweep;
}

}  // namespace dpt::ch02
