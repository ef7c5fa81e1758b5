// sweep_rules.cpp — chapter 02's batch sweep: its flags and its learning-rate
// grids (batch_sweep.h). The bookkeeping is the harness's (dpt/batch_sweep.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "batch_sweep.h"
#include "sweep_compare.h"

namespace dpt::ch02 {

namespace {
// The grids, one line per optimizer: powers of two, wide enough that the
// best rate of every batch from 8 to 4096 lies inside (measured: the page's
// table). Momentum's μ = 0.9 makes a step ~1/(1−μ) = 10× as long: its grid
// is sgd's ÷ 10. LARS moves each layer by lr·η of its norm (η = 0.001), so
// its rates are ~100× sgd's; LAMB's, like Adam's, are per-entry step sizes.
struct Grid {
  const char* optimizer;
  float lowest;  // the grid is lowest · 2^k, k = 0 … 8
};
const Grid kGrids[] = {
    {"sgd", 0.0125f},
    {"momentum", 0.00125f},
    {"lars", 1.25f},     // its global rate times η = 0.001 times a layer's norm: ~100× sgd's grid
    {"lamb", 0.000125f},  // Adam-sized steps: 1.25e-4 … 0.032
};
constexpr int kGridSize = 9;

}  // namespace

std::vector<float> learning_rate_grid(const std::string& optimizer) {
  for (const Grid& g : kGrids)
    if (optimizer == g.optimizer) return doubling_grid(g.lowest, kGridSize);
  return {};
}

std::string sweep_optimizers() {
  std::string names;
  for (const Grid& g : kGrids) names += (names.empty() ? "" : ", ") + std::string(g.optimizer);
  return names;
}

void add_sweep_flags(CLI::App& app, Options& options, MlpSweepFlags& flags) {
  flags.target = 0.80;
  SweepFlagSpec spec;
  spec.min_batch = kSweepMinBatch;
  spec.target_flag = "--target-accuracy";
  spec.target_help = "The sweep's target held-out accuracy, 0 < a <= 1";
  spec.lesson_flags = {"--batch", "--lr", "--steps"};
  spec.what = "Instead of the lesson: steps to --target-accuracy for batches 8 ... --sweep-max-batch (minutes)";
  spec.own_flags = {"--sweep-optimizers"};
  spec.checks = [&app, &options, &flags] {
    if (flags.max_batch > options.samples)
      throw CLI::ValidationError("--sweep-max-batch", std::to_string(flags.max_batch) + " is more than --samples " +
                                                          std::to_string(options.samples) + ": a batch is drawn from them");
    if (app.count("--sweep-optimizers") > 0) {
      if (app.count("--optimizer") > 0)
        throw CLI::ValidationError("--optimizer", "not used beside --sweep-optimizers: list the optimizers there");
      if (app.count("--sweep-plot") > 0)
        throw CLI::ValidationError("--sweep-plot",
                                   "plots one optimizer's sweep: give --optimizer NAME instead of --sweep-optimizers");
      parse_sweep_optimizers(flags.optimizers);  // refuses a name with no grid, a repeat, fewer than two
    } else if (learning_rate_grid(options.optimizer).empty()) {
      throw CLI::ValidationError("--optimizer", "--batch-sweep has a learning-rate grid for " + sweep_optimizers() +
                                                    ", not " + options.optimizer);
    }
    if (options.eval_samples == 0)
      throw CLI::ValidationError("--eval-samples", "--batch-sweep scores its target on the held-out set: give at least 1");
  };
  app.add_option("--sweep-optimizers", flags.optimizers,
                 "Sweep these in turn and compare them side by side, the first as the plain one, e.g. sgd,lars,lamb");
  dpt::add_sweep_flags(app, flags, spec);
}

SweepSettings sweep_settings(const SweepFlags& flags, const std::string& optimizer) {
  SweepSettings s;
  s.target = {flags.target, /*higher_is_better=*/true, "--target-accuracy", 100, 1, "%"};
  s.min_batch = kSweepMinBatch, s.max_batch = flags.max_batch, s.max_steps = flags.max_steps;
  s.warmup_samples = flags.warmup_samples;
  s.grid = learning_rate_grid(optimizer);
  s.first_rate = 1;  // the smallest batch's search starts at the grid's second rate
  s.optimizer = optimizer;
  return s;
}

}  // namespace dpt::ch02
