// ch02_batching — per-sample updates vs mini-batches.
//
// What it teaches: the loss of a mini-batch is the mean of its samples'
// losses, so its gradient is the mean of their gradients. A mini-batch of B
// therefore does in one optimizer step (one GEMM-shaped pass, and later one
// synchronisation) what B per-sample steps do to first order in the
// learning rate — and it is much faster per sample. The same identity lets
// a batch too large for memory be accumulated from micro-batches. It ends with ✔/✘
// verdicts computed from its numbers and exits 3 when one fails (1 when the
// run stops, e.g. on a diverged loss).
//
// What it leaves out: more than one device (chapter 03 splits the batch
// across ranks and averages the same way). Large batches — steps to a
// target against the batch, the critical batch, linear scaling with warm-up —
// are --batch-sweep's (batch_sweep.h; minutes, so not part of a bare run).
// The math is in docs/ch02_batching.md.
//
// Run it:
//     build/reference/bin/ch02_batching                 # B = --batch 32
//     build/reference/bin/ch02_batching --batch 8 --steps 200 --no-shuffle
//     build/reference/bin/ch02_batching --batch-sweep --samples 60000 --sweep-plot sweep.svg
//     build/reference/bin/ch02_batching --batch-sweep --samples 60000 --sweep-optimizers sgd,lars,lamb
//
// Your holes: dpt::ch02::per_sample_gradients and accumulated_gradient (ch02.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "batch_sweep.h"
#include "sweep_compare.h"
#include "ch02.h"
#include "checks.h"
#include "dpt/lecture.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

using namespace dpt;
using namespace dpt::ch02;

// The lecture's helpers, defined below it in the order it calls them.
struct Run {
  std::string name;
  float lr = 0;
  int64_t updates = 0;        // optimizer steps taken (counted, not computed)
  double seconds = 0;
  double loss_growth = 0;     // largest step loss / first step loss
  Evaluation after;
};
Run train(const Options& o, MLP& model, const Dataset& data, int64_t batch_size, float lr, int64_t samples,
          MetricsWriter& metrics, const Narrator& say);

// ----------------------------------------------------------------------------
// the lecture. Flags, data, the held-out score of the batched run and
// printing the verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const MlpSweepFlags& sweep) {
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  const Dataset& data = lec.data;
  Device& device = lec.device();

  // --------------------------------------------------------------------------
  // 1. Set-up
  say.section("1. Set-up");
  MLP model = build_model(o, device);
  lec.keep(model);  // the batched run's model: saved and scored on the held-out set at the end
  const int64_t batch_size = o.batch;
  say.say(str("data: ", data.size(), " samples; model: MLP ", o.model, "; B = --batch ", batch_size));
  if (sweep.enabled) {  // instead of sections 2-4: batch_sweep.h
    say.section("2. Steps to a target against the global batch");
    if (sweep.optimizers.empty())
      run_batch_sweep(lec, sweep);
    else
      run_optimizer_comparison(lec, sweep);  // --sweep-optimizers: each in turn, then side by side
    return;
  }
  if (o.steps == 0) return;
  Evaluation before = evaluate(model, data);

  // --------------------------------------------------------------------------
  // 2. Batch gradient = mean of per-sample gradients
  say.section("2. Batch gradient = mean of per-sample gradients");
  say.say("L_batch = (1/B) sum_i L_i, and the derivative is linear, so\n"
          "grad L_batch = (1/B) sum_i grad L_i. Your per_sample_gradients computes the right\n"
          "side; one backward over the whole batch computes the left.");
  BatchSampler first(data.size(), batch_size, !o.no_shuffle, o.seed);
  Batch first_batch = gather_batch(data, first.indices(0), device);
  GradientErrors grad_error = compare_gradients(model, first_batch, say);
  const int micro = int(std::min<int64_t>(3, batch_size));  // 3 pieces, of unequal size unless 3 divides B
  say.say("Gradient accumulation gets the same gradient from micro-batches, one pass at a\n"
          "time (the memory of one piece): your accumulated_gradient, " + str(micro, " micro-batches."));
  double accumulation_error = compare_accumulation(model, first_batch, micro);
  say.say("max |accumulated - batch| / max |batch| = " + fmt(accumulation_error, 2));

  // --------------------------------------------------------------------------
  // 3. B per-sample steps vs one step of B
  say.section("3. B per-sample steps vs one step of B");
  int64_t samples = o.steps * batch_size;
  say.say("Both runs see the same " + std::to_string(samples) + " samples in the same order, from the\n"
          "same start. B steps at lr/B move the weights like one step of B at lr (to first\n"
          "order in lr), with B times more optimizer steps: in chapter 03, B times more syncs.");
  MLP single = build_model(o, device);
  MetricsWriter no_metrics("");
  Run per_sample = train(o, single, data, 1, o.lr / float(batch_size), samples, no_metrics, say);
  MetricsWriter metrics(o.metrics);
  Run batched = train(o, model, data, batch_size, o.lr, samples, metrics, say);
  metrics.commit();  // the training lines are in place; the harness appends the held-out line after them

  // --------------------------------------------------------------------------
  // 4. Summary and verdicts
  say.section("4. Summary and verdicts");
  Table summary("ch02 runs (loss and accuracy on the whole data set)",
                {"run", "lr", "optimizer steps", "loss", "accuracy", "time", "samples/s"});
  summary.add_row({"start", "-", "0", fixed(before.loss, 4), fixed(100 * before.accuracy, 1) + "%", "-", "-"});
  for (const Run* r : {&per_sample, &batched}) {
    summary.add_row({r->name, fmt(r->lr, 3), std::to_string(r->updates), fixed(r->after.loss, 4),
                     fixed(100 * r->after.accuracy, 1) + "%", fixed(r->seconds, 2) + " s",
                     fixed(double(samples) / r->seconds, 0)});
  }
  summary.print(std::cout);
  std::cout << " " << fixed(per_sample.seconds / batched.seconds, 1) << "x faster per sample with batches of "
            << batch_size << "\n";
  lec.summary.add_row({"the model scored below", "the batch " + std::to_string(batch_size) + " run"});

  add_verdicts(lec.verdicts, {grad_error, first_batch.x.size(0), micro, accumulation_error, batch_size,
                               per_sample.updates, batched.updates, before.loss, per_sample.after.loss,
                               batched.after.loss, std::max(per_sample.loss_growth, batched.loss_growth)},
               o.optimizer, say);  // checks.cpp
}

// ----------------------------------------------------------------------------
// 3. training with batches of a given size

// Trains `model` on the sample stream in batches of `batch_size` until `samples` samples
// are seen. The stream is the same for every batch_size, so runs see identical data.
// A loss that stops being a number stops the run with a sentence.
Run train(const Options& o, MLP& model, const Dataset& data, int64_t batch_size, float lr, int64_t samples,
          MetricsWriter& metrics, const Narrator& say) {
  BatchSampler sampler(data.size(), o.batch, !o.no_shuffle, o.seed);  // stream in chunks of --batch
  auto optimizer = make_optimizer(o.optimizer, model.parameters(), lr);
  Run run;
  run.name = "batch " + std::to_string(batch_size);
  run.lr = lr;
  ProgressBar bar("ch02 " + run.name, samples / batch_size, say.enabled());
  double first_loss = 0, largest_loss = 0;
  auto start = std::chrono::steady_clock::now();
  for (int64_t update = 0; update < samples / batch_size; ++update) {
    auto step_start = std::chrono::steady_clock::now();
    int64_t position = update * batch_size;  // in the stream
    std::vector<int64_t> chunk = sampler.indices(position / o.batch);
    std::vector<int64_t> mine(chunk.begin() + position % o.batch, chunk.begin() + position % o.batch + batch_size);
    Batch batch = gather_batch(data, mine, model.parameters().front().device());
    optimizer->zero_grad();
    Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);
    double value = loss.item();
    require_finite_loss(value, update, lr);
    loss.backward();
    optimizer->step();
    ++run.updates;
    if (update == 0) first_loss = value;
    largest_loss = std::max(largest_loss, value);
    metrics.write(update, {{"loss", value}, {"compute_s", seconds_since(step_start)}, {"comm_s", 0.0}});
    bar.update(update + 1, "loss " + fixed(value, 4));
  }
  bar.finish();
  run.seconds = seconds_since(start);
  run.loss_growth = largest_loss / first_loss;
  run.after = evaluate(model, data);
  return run;
}

int main(int argc, char** argv) {
  MlpSweepFlags sweep;
  return run_one_device_chapter(
      argc, argv, {"ch02_batching", "per-sample updates vs mini-batches"},
      [&](CLI::App& app, Options& options) { add_sweep_flags(app, options, sweep); },
      [&](Lecture& lec) { lecture(lec, sweep); });
}
