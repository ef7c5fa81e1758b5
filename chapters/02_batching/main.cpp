// ch02_batching — per-sample updates vs mini-batches.
//
// What it teaches: the loss of a mini-batch is the mean of its samples'
// losses, so its gradient is the mean of their gradients. A mini-batch of K
// therefore does in one optimizer step (one GEMM-shaped pass, and later one
// synchronisation) what K per-sample steps do to first order in the
// learning rate — and it is much faster per sample.
//
// What it leaves out: more than one device (chapter 03 splits the batch
// across ranks and averages the same way), learning-rate scaling rules.
//
// Run it:
//     build/reference/bin/ch02_batching                 # K = --batch 32
//     build/reference/bin/ch02_batching --batch 8 --steps 200 --no-shuffle
//
// Your holes: dpt::ch02::per_sample_gradients and dpt::ch02::average_gradients.
#include <CLI/CLI.hpp>
#include <iostream>

#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "ch02_holes.h"

using namespace dpt;

// ----------------------------------------------------------------------------
// 1. the batch gradient is the mean of per-sample gradients

// Returns the largest |mean of per-sample − batch| over all parameters.
double compare_gradients(const MLP& model, const Batch& batch, const Narrator& say) {
  ch02::Gradients mean = ch02::average_gradients(ch02::per_sample_gradients(model, batch));
  std::vector<Tensor> params = model.parameters();
  for (auto& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();  // one pass, all K samples
  Table table("mean of " + std::to_string(batch.x.size(0)) + " per-sample gradients vs one batch gradient",
              {"parameter", "max |mean - batch|", "max |batch|"});
  double worst = 0;
  auto names = model.named_parameters();
  for (std::size_t p = 0; p < params.size(); ++p) {
    double diff = max_abs_diff(mean[p], params[p].grad());
    Tensor zero = Tensor::zeros(params[p].shape(), params[p].device());
    table.add_row({names[p].name, fmt(diff, 3), fmt(max_abs_diff(params[p].grad(), zero), 3)});
    worst = std::max(worst, diff);
  }
  for (auto& p : params) p.zero_grad();
  if (say.enabled()) table.print(std::cout);
  return worst;
}

// ----------------------------------------------------------------------------
// 2. training with batches of k

struct Run {
  std::string name;
  int64_t updates = 0;
  double seconds = 0;
  Evaluation after;
};

// Trains `model` on the sample stream in batches of `k` until `samples` samples
// are seen. The stream is the same for every k, so runs see identical data.
Run train(const Options& o, MLP& model, const Dataset& data, int64_t k, float lr, int64_t samples,
          MetricsWriter& metrics, const Narrator& say) {
  BatchSampler sampler(data.size(), o.batch, !o.no_shuffle, o.seed);  // stream in chunks of --batch
  auto optimizer = make_optimizer(o.optimizer, model.parameters(), lr);
  Run run;
  run.name = "batch " + std::to_string(k);
  run.updates = samples / k;
  ProgressBar bar("ch02 " + run.name, run.updates, say.enabled());
  auto start = std::chrono::steady_clock::now();
  for (int64_t update = 0; update < run.updates; ++update) {
    auto step_start = std::chrono::steady_clock::now();
    int64_t first = update * k;  // position in the stream
    std::vector<int64_t> all = sampler.indices(first / o.batch);
    std::vector<int64_t> mine(all.begin() + first % o.batch, all.begin() + first % o.batch + k);
    Batch batch = gather_batch(data, mine, model.parameters().front().device());
    optimizer->zero_grad();
    Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);
    loss.backward();
    optimizer->step();
    metrics.write(update, {{"loss", loss.item()}, {"compute_s", seconds_since(step_start)}, {"comm_s", 0.0}});
    bar.update(update + 1, "loss " + fixed(loss.item(), 4));
  }
  bar.finish();
  run.seconds = seconds_since(start);
  run.after = evaluate(model, data);
  return run;
}

// ----------------------------------------------------------------------------
// 3. the lecture

void run(const Options& o) {
  Narrator say(!o.quiet);
  say.section("1. Set-up");
  Dataset data = load_dataset(o);
  Device& device = Device::cpu(0);
  MLP model = build_model(o, device);
  say.say("data: " + std::to_string(data.size()) + " samples; model: MLP " + o.model + "; K = --batch " +
          std::to_string(o.batch));
  if (o.steps == 0) {
    save_outputs(o, model, data);
    say.say("--steps 0: wrote the requested outputs, no training.");
    return;
  }
  Evaluation before = evaluate(model, data);

  say.section("2. Batch gradient = mean of per-sample gradients");
  say.say("L_batch = (1/K) sum_k L_k, and the derivative is linear, so\n"
          "grad L_batch = (1/K) sum_k grad L_k. Your holes compute the right side.");
  BatchSampler first(data.size(), o.batch, !o.no_shuffle, o.seed);
  double grad_error = compare_gradients(model, gather_batch(data, first.indices(0), device), say);
  say.say("largest difference " + fmt(grad_error, 3) + " (float32 sums in a different order).");

  say.section("3. K per-sample steps vs one step of K");
  int64_t samples = o.steps * o.batch;
  float per_sample_lr = o.lr / float(o.batch);
  say.say("Both runs see the same " + std::to_string(samples) + " samples in the same order, from the\n"
          "same start. K steps at lr/K move the weights like one step of K at lr (to first\n"
          "order in lr), with K times more optimizer steps: in chapter 03, K times more syncs.");
  MLP single = build_model(o, device);
  MetricsWriter no_metrics("");
  Run per_sample = train(o, single, data, 1, per_sample_lr, samples, no_metrics, say);
  MetricsWriter metrics(o.metrics);
  Run batched = train(o, model, data, o.batch, o.lr, samples, metrics, say);
  save_outputs(o, model, data);

  Table summary("ch02 summary (loss and accuracy on the whole data set)",
                {"run", "lr", "optimizer steps", "loss", "accuracy", "time", "samples/s"});
  summary.add_row({"start", "-", "0", fixed(before.loss, 4), fixed(100 * before.accuracy, 1) + "%", "-", "-"});
  for (const Run* r : {&per_sample, &batched}) {
    summary.add_row({r->name, fmt(r == &batched ? o.lr : per_sample_lr, 3), std::to_string(r->updates),
                     fixed(r->after.loss, 4), fixed(100 * r->after.accuracy, 1) + "%", fixed(r->seconds, 2) + " s",
                     fixed(double(samples) / r->seconds, 0)});
  }
  summary.print(std::cout);
  std::cout << " batch gradient vs mean of per-sample gradients: max |difference| " << fmt(grad_error, 3)
            << "\n " << o.batch << "x fewer optimizer steps, " << fixed(per_sample.seconds / batched.seconds, 1)
            << "x faster per sample with batches of " << o.batch << "\n";
}

int main(int argc, char** argv) {
  CLI::App app{"ch02_batching — per-sample updates vs mini-batches", "ch02_batching"};
  Options options;
  add_common_flags(app, options);
  parse_flags(app, argc, argv);
  return run_guarded("ch02_batching", [&] { run(options); });
}
