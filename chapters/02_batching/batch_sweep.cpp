// batch_sweep.cpp — the MLP's runs in the batch sweep (batch_sweep.h): one run
// to the target held-out accuracy from the flags' initial weights, handed to
// the harness's sweep (dpt/batch_sweep.h), which tunes, scales, tables, plots
// and judges; the tuned run nearest the critical batch is the lecture's model.
#include "batch_sweep.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "dpt/line_chart.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/output_file.h"
#include "sweep_compare.h"

namespace dpt::ch02 {

namespace {

// The first kSweepEvalSamples samples of the held-out set, as their own data set.
Dataset eval_subset(const Dataset& held_out) {
  const int64_t n = std::min(kSweepEvalSamples, held_out.size());
  return {held_out.x.rows(0, n).clone(), std::vector<int64_t>(held_out.y.begin(), held_out.y.begin() + n),
          held_out.classes};
}

}  // namespace

SweepResult run_batch_sweep(Lecture& lec, const MlpSweepFlags& flags, const std::string& optimizer) {
  Options o = lec.o;
  if (!optimizer.empty()) o.optimizer = optimizer;
  const Narrator& say = lec.say;
  const Dataset eval = eval_subset(lec.held_out().data);
  const SweepSettings settings = sweep_settings(flags, o.optimizer);
  std::string grid_text;
  for (float lr : settings.grid) grid_text += (grid_text.empty() ? "" : " ") + fmt(lr, 3);
  say.say(str("target: ", settings.target.show(flags.target), " on the first ", eval.size(),
              " held-out samples, evaluated after\nsteps 1..16, then every ~9 %; no run past ", flags.max_steps,
              " steps. ", o.optimizer, "'s rate grid: ", grid_text, ".\n",
              "Linear rule: the smallest batch's tuned rate times B/", kSweepMinBatch,
              ", ramped up from it over the first ", flags.warmup_samples, " samples (warm-up)."));

  // One run from the flags' initial weights: batches of `batch` from the
  // seeded sample stream, rate lr_at(step). Its model waits in `last` until
  // the sweep says whether it is its batch's best so far.
  std::optional<MLP> last;
  std::map<int64_t, MLP> best;  // batch -> its best run's model
  auto train = [&](int64_t batch, const std::function<float(int64_t)>& lr_at, int64_t max_steps) {
    MLP model = build_model(o, lec.device());
    auto optimizer = make_optimizer(o.optimizer, model.parameters(), lr_at(0));
    BatchSampler sampler(lec.data.size(), batch, !o.no_shuffle, o.seed);
    int64_t step = 0;
    auto one_step = [&] {
      optimizer->lr = lr_at(step);
      Batch b = gather_batch(lec.data, sampler.indices(step++), lec.device());
      optimizer->zero_grad();
      Tensor loss = softmax_cross_entropy(model.forward(b.x), b.y);
      loss.backward();
      optimizer->step();
      return loss.item();
    };
    const TargetRun run =
        run_to_target(one_step, [&] { return evaluate(model, eval).accuracy; }, settings.target, max_steps);
    last = model;
    return run;
  };
  SweepResult sweep = dpt::run_batch_sweep(settings, train, say, [&](int64_t batch) { best.insert_or_assign(batch, *last); });

  print_sweep_tables(sweep, settings, say);
  if (!flags.plot.empty())
    write_output_file(flags.plot, svg(sweep_chart(sweep, "ch02: steps to " + settings.target.show(flags.target) +
                                                             " held-out accuracy, " + o.optimizer + ", MLP " + o.model)));
  // The lecture's model: the tuned run at the batch nearest the critical one (log scale).
  int64_t keep = -1;
  double keep_distance = INFINITY;
  for (const auto& [batch, model] : best) {
    const double distance = std::abs(std::log2(double(batch) / sweep.knee.critical_batch));
    if (keep < 0 || distance < keep_distance) keep = batch, keep_distance = distance;
  }
  // Beside --sweep-optimizers, the first (plain) optimizer's run is the one kept.
  const bool keeps = flags.optimizers.empty() || parse_sweep_optimizers(flags.optimizers).front() == o.optimizer;
  if (keep >= 0 && keeps) {
    lec.keep(best.at(keep));
    lec.summary.add_row({"the model scored below", "the tuned " + o.optimizer + " run at B = " + std::to_string(keep)});
  }
  add_sweep_verdicts(lec.verdicts, sweep, settings, optimizer.empty() ? "" : optimizer + ": ");
  return sweep;
}

}  // namespace dpt::ch02
