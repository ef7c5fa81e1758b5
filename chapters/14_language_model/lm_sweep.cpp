// lm_sweep.cpp — the GPT's runs in the batch sweep (lm_sweep.h): its flags,
// its rate grids, and one run to the target held-out bits per character on
// one device. The sweep around them is the harness's (dpt/batch_sweep.h).
#include "lm_sweep.h"

#include <CLI/CLI.hpp>
#include <cmath>

#include "dpt/check.h"
#include "dpt/output_file.h"
#include "dpt/text_windows.h"
#include "lm_training.h"

namespace {
// The grids, lowest · 2^k, k = 0 … 8. AdamW's step is ~lr per entry whatever
// the gradient's scale: 1.25e-4 … 0.032 holds nanoGPT's 1e-3 near its middle
// and a rate at which the run diverges above (the page's sweep: 0.004 best at
// every batch). Plain SGD's step is lr × the gradient: 0.05 … 12.8, an
// unmeasured guess (the GPT's gradients are small) that the printed grid
// table lets a run check.
struct Grid {
  const char* optimizer;
  float lowest;
};
const Grid kGrids[] = {{"adamw", 1.25e-4f}, {"sgd", 0.05f}};
constexpr int kGridSize = 9;
}  // namespace

std::vector<float> lm_learning_rate_grid(const std::string& optimizer) {
  for (const Grid& g : kGrids)
    if (optimizer == g.optimizer) return dpt::doubling_grid(g.lowest, kGridSize);
  return {};
}

void add_lm_sweep_flags(CLI::App& app, const Ch14Flags& f, dpt::SweepFlags& sweep) {
  // The page's run (\ref ch14_sweep): 3.2 bits is past the plateau the loss crosses near 3.4-3.5.
  sweep.target = 3.2, sweep.max_batch = 128, sweep.max_steps = 2000, sweep.warmup_samples = 1024;
  dpt::SweepFlagSpec spec;
  spec.min_batch = kLmSweepMinBatch;
  spec.target_flag = "--target-bits";
  spec.target_help = "The sweep's target held-out loss in bits per character (a uniform guess over V is log2 V)";
  spec.target_lo = 0, spec.target_hi = 32;
  spec.lesson_flags = {"--batch",  "--lr",      "--steps",        "--eval-every", "--eval-batches",
                       "--sample", "--prompt", "--save-weights", "--metrics"};
  spec.plot_flag = false;  // --plot writes the sweep's chart instead of the loss curve
  spec.what = "Instead of training and sampling: steps to --target-bits for batches 4 ... --sweep-max-batch, on one "
              "rank (tens of minutes on 2 cores)";
  spec.checks = [&app, &f] {
    if (lm_learning_rate_grid(f.optimizer).empty())
      throw CLI::ValidationError("--optimizer", "--batch-sweep has a learning-rate grid for adamw and sgd, not " + f.optimizer);
    if (app.count("--ranks") > 0 && app.get_option("--ranks")->as<int>() != 1)
      throw CLI::ValidationError("--ranks", "--batch-sweep runs on one rank: it measures steps against the global "
                                            "batch, and D ranks x B/D are one device x B (the lesson's step check)");
  };
  spec.run_checks = [&app, &f] {
    if (f.sync == "library" && app.count("--bucket-mb") > 0)
      throw CLI::ValidationError("--bucket-mb", "only with --sync buckets: the library's all-reduce runs once, after "
                                                "backward, on every gradient at once");
  };
  dpt::add_sweep_flags(app, sweep, spec);
}

dpt::SweepSettings lm_sweep_settings(const dpt::SweepFlags& sweep, const std::string& optimizer) {
  dpt::SweepSettings s;
  s.target = {sweep.target, /*higher_is_better=*/false, "--target-bits", 1, 3, " bits"};
  s.min_batch = kLmSweepMinBatch, s.max_batch = sweep.max_batch, s.max_steps = sweep.max_steps;
  s.warmup_samples = sweep.warmup_samples;
  s.grid = lm_learning_rate_grid(optimizer);
  s.first_rate = 2;  // adamw: 5e-4, half nanoGPT's 1e-3 at B = 12, for B = 4
  return s;
}

dpt::TargetRun train_gpt_to_target(const Corpus& text, const Ch14Flags& f, const std::vector<float>& initial,
                                   dpt::Device& device, int64_t batch, const std::function<float(int64_t)>& lr_at,
                                   int64_t max_steps, const dpt::SweepTarget& target) {
  dpt::Rng rng(f.seed);
  Gpt model(f.shape, device, rng);
  set_flat_values(model, initial);
  Ch14Flags run = f;
  run.lr = lr_at(0);
  auto optimizer = make_lm_optimizer(run, model.parameters());
  const int64_t T = f.shape.context;
  const dpt::WindowSampler sampler(int64_t(text.train.size()), T, batch, !f.no_shuffle, f.seed);
  int64_t step = 0;
  auto one_step = [&] {
    optimizer->lr = lr_at(step);
    dpt::TokenBatch b = dpt::window_batch(text.train, sampler.starts(step++), T);
    optimizer->zero_grad();
    dpt::Tensor loss = model.loss(b.inputs, b.targets, batch);
    loss.backward();
    optimizer->step();
    return loss.item();
  };
  Ch14Flags eval = f;  // held_out_loss scores eval_batches × batch windows
  eval.batch = 16, eval.eval_batches = kLmSweepEvalWindows / 16;
  auto bits = [&] { return held_out_loss(model, text, eval) / std::log(2.0); };
  return dpt::run_to_target(one_step, bits, target, max_steps);
}

void run_lm_sweep(dpt::ModelChapterRun& run, const Gpt& model, const Corpus& text, const Ch14Flags& f,
                  const dpt::SweepFlags& sweep) {
  DPT_CHECK(run.ctx.world == 1, "--batch-sweep runs on one rank, this run has " << run.ctx.world
                                     << ": launch it without mpirun (D ranks x B/D are one device x B)");
  const dpt::SweepSettings settings = lm_sweep_settings(sweep, f.optimizer);
  std::string grid;
  for (float lr : settings.grid) grid += (grid.empty() ? "" : " ") + dpt::fmt(lr, 3);
  run.say.say(dpt::str("target: ", settings.target.show(sweep.target), " per character on ", kLmSweepEvalWindows,
                       " held-out windows of ", f.shape.context, ", evaluated after\nsteps 1..16, then every ~9 %; no run past ",
                       sweep.max_steps, " steps. ", f.optimizer, "'s rate grid: ", grid, ".\n",
                       "Linear rule: the smallest batch's tuned rate times B/", kLmSweepMinBatch,
                       ", ramped up from it over the first ", sweep.warmup_samples, " sequences (warm-up).\n",
                       "One rank: a global batch of B is the same step on 1 rank as on D ranks of B/D (the step check)."));
  const std::vector<float> initial = flat_values(model);
  auto train = [&](int64_t batch, const std::function<float(int64_t)>& lr_at, int64_t max_steps) {
    return train_gpt_to_target(text, f, initial, run.ctx.device, batch, lr_at, max_steps, settings.target);
  };
  const dpt::SweepResult result = dpt::run_batch_sweep(settings, train, run.say);
  dpt::print_sweep_tables(result, settings, run.say);
  if (!f.plot.empty()) {  // a title that fits the chart's 640 px
    const std::string model = dpt::str("L=", f.shape.layers, " H=", f.shape.heads, " C=", f.shape.width, " T=", f.shape.context);
    dpt::write_output_file(f.plot, dpt::svg(dpt::sweep_chart(result, "ch14: steps to " + settings.target.show(sweep.target) +
                                                                         " per char held out, " + f.optimizer + ", " +
                                                                         model + ", " + text.name)));
  }
  dpt::add_sweep_verdicts(run.verdicts, result, settings);
  run.summary.add_row({"data", text.name});
  run.summary.add_row({"critical batch", dpt::fmt(result.knee.critical_batch, 4) + " sequences of " +
                                             std::to_string(f.shape.context) + " characters"});
  run.summary.add_row({"sweep", dpt::fixed(result.seconds, 0) + " s"});
}
