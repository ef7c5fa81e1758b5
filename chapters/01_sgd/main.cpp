// ch01_sgd — single-device SGD: forward, loss, backward, step.
//
// What it teaches: the four moves every training step makes, on one device,
// and how to trust a gradient (compare it with finite differences). Each
// later chapter keeps this loop and changes only where gradients go.
//
// What it leaves out: more than one device (chapter 03), batching trade-offs
// (chapter 02), learning-rate schedules.
//
// Run it:
//     build/reference/bin/ch01_sgd                      # defaults: 784-256-10 on synthetic data
//     build/reference/bin/ch01_sgd --steps 500 --optimizer momentum --metrics ch01.jsonl
//     build/reference/bin/ch01_sgd --help
//
// Your holes: dpt::ch01::sgd_update and dpt::ch01::linear_backward (ch01_holes.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "ch01_holes.h"

using namespace dpt;

// ----------------------------------------------------------------------------
// 1. checking gradients

// Central differences on the 5 largest-gradient entries of every parameter:
// the oracle that shares no code with autograd. Returns the worst relative error.
double finite_difference_check(const MLP& model, const Batch& batch, const Narrator& say) {
  for (auto& p : model.parameters()) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  NoGradGuard no_grad;
  auto loss = [&] { return double(softmax_cross_entropy(model.forward(batch.x), batch.y).item()); };
  // eps trades truncation error (eps^2) against float32 rounding (1/eps) and
  // ReLU kinks crossed by the nudge; 1e-3 keeps all three near 1% here.
  const float eps = 1e-3f;
  double worst = 0;
  Table table("finite differences vs backward() (5 largest-gradient entries per parameter)",
              {"parameter", "autograd", "numeric", "relative error"});
  for (auto& named : model.named_parameters()) {
    Tensor p = named.tensor;
    std::vector<float> grad = p.grad().to_vector();
    std::vector<int64_t> order(grad.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    std::partial_sort(order.begin(), order.begin() + std::min<std::size_t>(5, order.size()), order.end(),
                      [&](int64_t a, int64_t b) { return std::abs(grad[a]) > std::abs(grad[b]); });
    double rel = 0, shown_auto = 0, shown_num = 0;
    for (std::size_t k = 0; k < std::min<std::size_t>(5, order.size()); ++k) {
      int64_t i = order[k];
      float saved = p.data()[i];
      p.data()[i] = saved + eps;
      double up = loss();
      p.data()[i] = saved - eps;
      double down = loss();
      p.data()[i] = saved;
      double numeric = (up - down) / (2 * eps);
      double error = std::abs(numeric - grad[i]) / std::max(1e-12, std::abs(numeric));
      if (k == 0 || error > rel) rel = error, shown_auto = grad[i], shown_num = numeric;
    }
    worst = std::max(worst, rel);
    table.add_row({named.name, fmt(shown_auto, 5), fmt(shown_num, 5), fmt(rel, 2)});
  }
  if (say.enabled()) table.print(std::cout);
  return worst;
}

// Runs the student's linear_backward on the last layer and compares it with
// what autograd computed for the same layer.
double check_linear_backward(const MLP& model, const Batch& batch) {
  const Linear& last = model.layers().back();
  Tensor h = batch.x;  // input of the last layer
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i + 1 < model.layers().size(); ++i) h = relu(model.layers()[i].forward(h));
  }
  // dy = d loss / d logits, from a copy of the logits made a leaf.
  Tensor logits = linear(h, last.weight, last.bias).clone().set_requires_grad(true);
  softmax_cross_entropy(logits, batch.y).backward();
  ch01::LinearGrads mine = ch01::linear_backward(h, last.weight, logits.grad());
  for (auto& p : model.parameters()) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  return std::max(max_abs_diff(mine.dweight, last.weight.grad()), max_abs_diff(mine.dbias, last.bias.grad()));
}

// ----------------------------------------------------------------------------
// 2. training

struct TrainResult {
  std::vector<double> losses;
  double seconds = 0;
};

TrainResult train(const Options& o, MLP& model, const Dataset& data, const Narrator& say) {
  std::vector<Tensor> params = model.parameters();
  // Plain SGD runs *your* update; the others use dpt's optimizers.
  std::unique_ptr<Optimizer> optimizer;
  if (o.optimizer != "sgd") optimizer = make_optimizer(o.optimizer, params, o.lr);
  BatchSampler sampler(data.size(), o.batch, !o.no_shuffle, o.seed);
  MetricsWriter metrics(o.metrics);
  ProgressBar bar("ch01 train", o.steps, say.enabled());
  TrainResult result;
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < o.steps; ++step) {
    auto step_start = std::chrono::steady_clock::now();
    Batch batch = gather_batch(data, sampler.indices(step), model.parameters().front().device());
    for (auto& p : params) p.zero_grad();
    Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);  // forward + loss
    loss.backward();                                                       // backward
    if (optimizer) {                                                       // step
      optimizer->step();
    } else {
      for (auto& p : params) ch01::sgd_update(p, p.grad(), o.lr);
    }
    result.losses.push_back(loss.item());
    metrics.write(step, {{"loss", result.losses.back()}, {"compute_s", seconds_since(step_start)}, {"comm_s", 0.0}});
    bar.update(step + 1, "loss " + fixed(result.losses.back(), 4));
  }
  bar.finish();
  result.seconds = seconds_since(start);
  return result;
}

// ----------------------------------------------------------------------------
// 3. the lecture

void run(const Options& o) {
  Narrator say(!o.quiet);
  say.section("1. Set-up");
  Dataset data = load_dataset(o);
  Device& device = Device::cpu(0);
  MLP model = build_model(o, device);
  say.say("data: " + std::to_string(data.size()) + " samples of " + std::to_string(data.features()) +
          " features, " + std::to_string(data.classes) + " classes (" + o.data + ")");
  say.say("model: MLP " + o.model + ", " + std::to_string(model.num_parameters()) + " parameters (" +
          format_bytes(double(model.num_parameters()) * 4) + ") on " + device.name());
  if (o.steps == 0) {
    save_outputs(o, model, data);
    say.say("--steps 0: wrote the requested outputs, no training.");
    return;
  }
  Evaluation before = evaluate(model, data);

  say.section("2. Can we trust backward()?");
  say.say("backward() applies the chain rule layer by layer. A finite difference\n"
          "(L(w+eps) - L(w-eps)) / 2eps estimates the same derivative without it.");
  Batch probe = gather_batch(data, BatchSampler(data.size(), std::min<int64_t>(o.batch, data.size()), false, 0).indices(0), device);
  double fd_error = finite_difference_check(model, probe, say);
  say.say("worst relative error " + fmt(fd_error, 2) + " (float32 central differences agree to about 1e-2).");
  double linear_error = check_linear_backward(model, probe);
  say.say("your linear_backward vs autograd on the last layer: max |difference| = " + fmt(linear_error, 3));

  say.section("3. Training: forward, loss, backward, step");
  say.say(std::to_string(o.steps) + " steps of " + std::to_string(o.batch) + " samples, " + o.optimizer +
          " with lr " + fmt(o.lr));
  TrainResult trained = train(o, model, data, say);
  Evaluation after = evaluate(model, data);
  save_outputs(o, model, data);

  double flops = 3.0 * model.forward_flops(o.batch) * double(o.steps);  // forward + 2× for backward
  Table summary("ch01 summary", {"what", "value"});
  summary.add_row({"loss on the data set, before", fixed(before.loss, 4)});
  summary.add_row({"loss on the data set, after", fixed(after.loss, 4)});
  summary.add_row({"accuracy, before -> after", fixed(100 * before.accuracy, 1) + "% -> " + fixed(100 * after.accuracy, 1) + "%"});
  summary.add_row({"steps x batch", std::to_string(o.steps) + " x " + std::to_string(o.batch)});
  summary.add_row({"time", fixed(trained.seconds, 2) + " s"});
  summary.add_row({"step GFLOP/s (3x forward convention)", fixed(flops / trained.seconds / 1e9, 1)});
  summary.add_row({"finite differences, worst relative error", fmt(fd_error, 2)});
  summary.add_row({"your linear_backward max error", fmt(linear_error, 3)});
  summary.add_row({"peak memory on " + device.name(), format_bytes(double(device.peak_bytes()))});
  summary.print(std::cout);
}

int main(int argc, char** argv) {
  CLI::App app{"ch01_sgd — single-device SGD: forward, loss, backward, step", "ch01_sgd"};
  Options options;
  add_common_flags(app, options);
  parse_flags(app, argc, argv);
  return run_guarded("ch01_sgd", [&] { run(options); });
}
