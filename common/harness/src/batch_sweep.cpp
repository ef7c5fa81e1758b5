// batch_sweep.cpp — the batch sweep's bookkeeping and its loop (batch_sweep.h):
// when a run is evaluated, when it has reached the target or diverged, the
// linear rule, the critical batch read off the curve, and for each batch the
// grid search for the rate that reaches the target in the fewest steps.
#include "dpt/batch_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dpt {

std::string SweepTarget::show(double score) const { return fixed(scale * score, decimals) + unit; }

std::vector<int64_t> evaluation_steps(int64_t max_steps) {
  std::vector<int64_t> steps;
  for (int64_t s = 1; s <= std::min<int64_t>(16, max_steps); ++s) steps.push_back(s);
  while (!steps.empty() && steps.back() < max_steps)
    steps.push_back(std::min(max_steps, int64_t(std::ceil(double(steps.back()) * std::pow(2.0, 0.125)))));
  return steps;
}

TargetRun run_to_target(const std::function<double()>& step, const std::function<double()>& score,
                        const SweepTarget& target, int64_t max_steps) {
  TargetRun run;
  double first_loss = 0;
  for (int64_t evaluate_after : evaluation_steps(max_steps)) {
    while (run.steps_taken < evaluate_after) {
      const double loss = run.last_loss = step();
      if (run.steps_taken++ == 0) first_loss = loss;
      if (!std::isfinite(loss) || loss > kDivergedLossRatio * first_loss) {
        run.diverged = true;
        return run;
      }
    }
    run.score = score();
    if (target.reached(run.score)) {
      run.steps = run.steps_taken;
      return run;
    }
  }
  return run;
}

float linear_rule_lr(float reference, int64_t reference_batch, int64_t batch, int64_t warmup_samples, int64_t step) {
  const float scaled = reference * float(batch) / float(reference_batch);
  const double ramped = warmup_samples > 0 ? std::min(1.0, double(step * batch) / double(warmup_samples)) : 1.0;
  return reference + (scaled - reference) * float(ramped);
}

Knee critical_batch(const std::vector<SweepPoint>& points) {
  Knee knee;
  int reached = 0;
  for (const SweepPoint& p : points) {
    if (p.tuned_steps <= 0) continue;
    const double steps = double(p.tuned_steps), samples = steps * double(p.batch);
    knee.min_steps = reached == 0 ? steps : std::min(knee.min_steps, steps);
    knee.min_samples = reached == 0 ? samples : std::min(knee.min_samples, samples);
    ++reached;
  }
  if (reached >= 2) knee.critical_batch = knee.min_samples / knee.min_steps;
  return knee;
}

namespace {

// The grid search at one batch, into p.grid_runs and p.tuned_*. It starts at
// `start` and walks up the grid while each rate does better (fewer steps to
// the target, or the first to reach it), else down from `start`: steps to the
// target are taken to be unimodal in the rate, which the printed grid lets a
// reader check. Each run stops at the best steps so far, so a worse rate
// costs no more than the best.
void search_grid(SweepPoint& p, const SweepSettings& settings, int start, const TrainToTarget& train,
                 const std::function<void(int64_t)>& on_best) {
  const std::vector<float>& grid = settings.grid;
  p.grid_runs.assign(grid.size(), std::nullopt);
  int best = -1;     // the rate with the fewest steps to the target
  int nearest = -1;  // while none has reached it: the rate whose run ended nearest it
  auto attempt = [&](int i) {
    const int64_t cap = best < 0 ? settings.max_steps : std::min(settings.max_steps, p.grid_runs[best]->steps);
    const float lr = grid[std::size_t(i)];
    const TargetRun run = train(p.batch, [lr](int64_t) { return lr; }, cap);
    p.grid_runs[std::size_t(i)] = run;
    if (run.reached() && (best < 0 || run.steps < p.grid_runs[best]->steps)) {
      best = i;
      if (on_best) on_best(p.batch);
      return true;
    }
    const bool nearer = best < 0 && !run.diverged &&
                        (nearest < 0 || settings.target.better(run.score, p.grid_runs[nearest]->score));
    if (nearer) nearest = i;
    return nearer;
  };
  attempt(start);
  int i = start + 1;
  while (i < int(grid.size()) && attempt(i)) ++i;
  if (i == start + 1) {  // the first rate up did no better: walk down instead, past rates that diverge
    i = start - 1;
    while (i >= 0 && (attempt(i) || (best < 0 && p.grid_runs[std::size_t(i)]->diverged))) --i;
  }
  if (best >= 0) p.tuned_steps = p.grid_runs[best]->steps, p.tuned_lr = grid[std::size_t(best)];
}

}  // namespace

SweepResult run_batch_sweep(const SweepSettings& settings, const TrainToTarget& train, const Narrator& say,
                            const std::function<void(int64_t)>& on_best) {
  const auto start_time = std::chrono::steady_clock::now();
  const std::vector<float>& grid = settings.grid;
  SweepResult sweep;
  int start = std::clamp(settings.first_rate, 0, int(grid.size()) - 1);
  for (int64_t batch = settings.min_batch; batch <= settings.max_batch; batch *= 2) {
    SweepPoint p;
    p.batch = batch;
    search_grid(p, settings, start, train, on_best);
    if (batch == settings.min_batch) sweep.reference_lr = p.tuned_lr;
    if (sweep.reference_lr > 0) {  // the linear rule, ramped from the reference rate
      const float reference = sweep.reference_lr;
      const int64_t min_batch = settings.min_batch, warmup = settings.warmup_samples;
      auto lr_at = [=](int64_t step) { return linear_rule_lr(reference, min_batch, batch, warmup, step); };
      const int64_t cap = p.tuned_steps > 0 ? std::min(settings.max_steps, kLinearStepsAllowance * p.tuned_steps)
                                            : settings.max_steps;
      p.linear_end = train(batch, lr_at, cap);
      p.linear_lr = linear_rule_lr(reference, min_batch, batch, warmup, settings.max_steps);
      p.linear_steps = p.linear_end.steps, p.linear_diverged = p.linear_end.diverged;
    }
    say.say(str("B = ", batch, ": tuned ",
                p.tuned_steps > 0 ? str(p.tuned_steps, " steps at lr ", fmt(p.tuned_lr, 3)) : std::string("not reached"),
                "; linear rule ",
                p.linear_diverged ? std::string("diverged")
                : p.linear_steps > 0 ? str(p.linear_steps, " steps")
                                     : std::string("not reached"),
                " (", fixed(seconds_since(start_time), 0), " s so far)"));
    if (p.tuned_steps > 0) {  // twice the batch: try twice the rate first
      const int best = int(std::find(grid.begin(), grid.end(), p.tuned_lr) - grid.begin());
      start = std::min(int(grid.size()) - 1, best + 1);
    }
    sweep.points.push_back(std::move(p));
  }
  sweep.knee = critical_batch(sweep.points);
  sweep.seconds = seconds_since(start_time);
  return sweep;
}

std::vector<float> doubling_grid(float lowest, int size) {
  std::vector<float> grid;
  for (int k = 0; k < size; ++k) grid.push_back(lowest * float(int64_t(1) << k));
  return grid;
}

}  // namespace dpt
