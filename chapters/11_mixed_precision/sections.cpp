// sections.cpp — the lecture's checks besides training (sections.h).
#include "sections.h"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <iostream>

#include "ch11.h"
#include "dpt/flatten.h"
#include "dpt/gpu.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "recompute.h"

namespace dpt::ch11 {

// ----------------------------------------------------------------------------
// 1. the formats: a few numbers, rounded, and the rounding's own check

void show_formats(const Narrator& say, Verdicts& v) {
  Table t("float32 rounded to 16 bits", {"x", "bf16", "fp16"});
  for (float x : {1.0f / 3, 1.00390625f, 65504.0f, 65520.0f, 1e-5f, 3e-8f, 1e-30f})
    t.add_row({fmt(x, 8), fmt(round_to(Precision::BF16, x), 8), fmt(round_to(Precision::FP16, x), 8)});
  if (say.enabled()) t.print(std::cout);
  say.say("bf16 keeps float32's 8 exponent bits (1e-30 survives) and 8 significant bits (1/3 -> 0.333984);\n"
          "fp16 keeps 11 significant bits but tops out at 65504 and flushes below 2^-25 (3e-8) to 0.");
  // Ties to even, fp16's subnormal and overflow boundaries, from the formats' definitions.
  const bool ok = round_to(Precision::BF16, 1.00390625f) == 1.0f && round_to(Precision::BF16, 1.01171875f) == 1.015625f &&
                  round_to(Precision::FP16, 65504.0f) == 65504.0f && std::isinf(round_to(Precision::FP16, 65520.0f)) &&
                  round_to(Precision::FP16, 0x1p-25f) == 0.0f && round_to(Precision::FP16, 0x1.8p-25f) == 0x1p-24f &&
                  std::isnan(round_to(Precision::BF16, NAN)) && std::isnan(round_to(Precision::FP16, NAN));
  v.holds("rounding to bf16/fp16: ties to even, fp16 subnormals, 65520 -> inf, NaN stays NaN", ok);
}

// ----------------------------------------------------------------------------
// 2. one bf16 weight of 1.0, gradient 1 stored at scale 1024, SGD lr 1e-3:
// ten updates of 0.001 each, every one below half of bf16's step at 1.0 (2^-8)

void small_updates(const Narrator& say, Verdicts& v) {
  Tensor w = Tensor::full({1}, 1.0f, Device::host()), master = w.clone();
  w.set_requires_grad(true), master.set_requires_grad(true);
  std::vector<Tensor> params{w}, masters{master};
  SGD sgd(masters, 1e-3f);
  for (int k = 0; k < 10; ++k) {
    w.set_grad(Tensor::full({1}, 1024.0f, Device::host()));  // d(1024 · loss)/dw, stored exactly in 16 bits
    master_step(params, masters, sgd, 1024.0f, Precision::BF16);
  }
  say.say("w = 1.0 in bf16 (next values 0.99609375 and 1.0078125), 10 SGD steps of lr 1e-3 x gradient 1:\n"
          "  fp32 master: " + fmt(master.data()[0], 8) + ", bf16 weight: " + fmt(w.data()[0], 8) +
          ". Made in bf16, each update would round back to 1.0.");
  v.near("your master_step: the fp32 master after 10 updates of 1e-3 (a run scaled by 1024)", master.data()[0], 0.99,
         1e-6, "fp32 rounding of ten steps; made in 16 bits they would round away (1.0)");
  v.holds("your master_step: the bf16 weight is the master rounded to bf16",
          w.data()[0] == round_to(Precision::BF16, master.data()[0]), "weight " + fmt(w.data()[0], 8));
}

// ----------------------------------------------------------------------------
// 3. a gradient of inf: master_step must skip, touching nothing

void overflowed_step(const Options& o, Device& device, const Narrator& say, Verdicts& v) {
  MLP model = build_model(o, device);
  std::vector<Tensor> params = model.parameters(), masters;
  for (Tensor& w : params) round_(w, Precision::FP16), masters.push_back(w.clone().set_requires_grad(true));
  std::unique_ptr<Optimizer> opt = make_optimizer(o.optimizer, masters, o.lr);
  auto all_bits = [&] {  // weights, masters and optimizer state, copied to the host
    std::vector<Tensor> all = params;
    all.insert(all.end(), masters.begin(), masters.end());
    for (const Tensor& t : opt->state_tensors()) all.push_back(t);
    return flatten(all);
  };
  for (int step = 0; step < 2; ++step) {  // one good step first, so the optimizer holds state to keep
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::vector<float> g(std::size_t(params[i].numel()), 1.0f);
      if (step == 1) g[g.size() / 2] = INFINITY;  // what 70000 becomes in fp16
      params[i].set_grad(Tensor::from_vector(params[i].shape(), g, device));
    }
    const std::vector<float> before = all_bits();
    const bool stepped = master_step(params, masters, *opt, 1.0f, Precision::FP16);
    if (step == 0) continue;
    const std::vector<float> after = all_bits();
    const bool same = !stepped && before.size() == after.size() &&
                      std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0;
    say.say("one gradient entry is inf: master_step returned " + std::string(stepped ? "true (stepped)" : "false (skipped)") +
            "; weights, masters and " + o.optimizer + "'s state " + (same ? "kept every bit." : "CHANGED."));
    v.holds("your master_step skips a step with an inf gradient, every bit kept", same,
            stepped ? "it stepped" : (same ? "" : "it returned false but changed bits"));
  }
}

// The scaler on its own, fed events instead of a training run's overflows:
// "C" a clean step, "O" one that overflowed. Interval 3 from 2^16 (growth,
// backoff, a backoff in the middle of a run of clean steps, a long clean
// run); from 2^127, where a growth would be inf; then the goal law: 500 steps
// that overflow exactly when the scale is above a ceiling S* = 3000.
void scaler_alone(const Options& o, Device& device, const Narrator& say, Verdicts& v) {
  struct Script { float start; int64_t interval; std::string events; };
  for (const Script& script : {Script{65536.0f, 3, "CCCOCCOCCCCOOCCCCCCCCCCCCCCC"}, Script{std::ldexp(1.0f, 127), 2, "CCCCO"}}) {
    Setting s{Precision::FP16, LossScaler{}, "dynamic"};
    s.scaler.scale = script.start, s.scaler.growth_interval = script.interval;
    LossScaler scaler = s.scaler;
    MixedRun run(build_model(o, device));
    std::string shown;
    for (char event : script.events) {
      run.scales.push_back(scaler.scale), run.overflowed.push_back(event == 'O');
      shown += str(" ", event, ":", fmt(scaler.scale, 6));
      update_loss_scale(scaler, event == 'O');
    }
    say.say("interval " + std::to_string(script.interval) + ", each step's event (C clean, O overflow) and the scale it used:" + shown);
    const std::string departure = scale_departure(s, run);
    v.holds("your update_loss_scale from " + fmt(script.start, 6) + ", interval " + std::to_string(script.interval) + ", " +
                script.events + ": the scale kept the scaler's laws (ch11.h)",
            departure.empty(), departure);
  }
  LossScaler scaler;
  scaler.growth_interval = 5;
  const float ceiling = 3000;
  int64_t skipped = 0;
  float lowest = INFINITY, highest = 0;
  for (int t = 0; t < 500; ++t) {
    const bool overflowed = scaler.scale > ceiling;
    if (t >= 250) skipped += overflowed, lowest = std::min(lowest, scaler.scale), highest = std::max(highest, scaler.scale);
    update_loss_scale(scaler, overflowed);
  }
  say.say(str("500 steps that overflow exactly when the scale is above 3000, interval 5, from 65536: over the last 250 "
              "the scale ranged over [", fmt(lowest, 6), ", ", fmt(highest, 6), "], ", skipped, " skipped"));
  const bool near = lowest >= ceiling / 16 && highest <= ceiling * 16;
  v.holds("your update_loss_scale under a ceiling S* = 3000: through the last 250 of 500 steps within a factor 16 of S*",
          near, str("the scale ranged over [", fmt(lowest, 6), ", ", fmt(highest, 6), "]",
                    near ? "" : ": it did not settle near the largest safe scale"));
  v.at_most("your update_loss_scale under a ceiling S* = 3000: steps skipped of the last 250 (2 in every interval of 5)",
            double(skipped), 100, "each skip is a step thrown away");
}

// The scale sequence against ch11.h's step-by-step laws, each read off the
// trace: S_t, the scale after step t's update, is run.scales[t].
std::string scale_departure(const Setting& s, const MixedRun& run) {
  const std::vector<float>& S = run.scales;
  const int64_t patience = 4 * s.scaler.growth_interval;
  int64_t clean_run = 0;  // clean steps in a row, none of them growing the scale
  for (std::size_t t = 1; t < S.size(); ++t) {
    const bool overflowed = run.overflowed[t - 1];
    const float before = S[t - 1], after = S[t];
    const std::string at = str("after step ", t, " (", overflowed ? "overflowed" : "clean", ") the scale went from ",
                               fmt(before, 6), " to ", fmt(after, 6), ": ");
    if (!(std::isfinite(after) && after > 0 && std::isfinite(1 / after)))
      return at + "the scale and its reciprocal must stay finite floats above 0";
    if (overflowed && !(after < before) && std::isfinite(1 / (before / 2))) return at + "an overflow must shrink it";
    if (overflowed) {
      clean_run = 0;
      continue;
    }
    if (after < before) return at + "a clean step must never shrink it";
    clean_run = after > before ? 0 : clean_run + 1;
    if (clean_run >= patience && std::isfinite(2 * after))
      return at + str(clean_run, " clean steps in a row left it there: among any ", patience,
                      " (4 x growth interval) one must grow it");
  }
  return "";
}

// ----------------------------------------------------------------------------
// 6. recomputation: one step per policy on the same weights and batch

void recompute_section(const Options& o, Device& device, Precision p, const std::string& model, const Narrator& say,
                       Verdicts& v) {
  Options deep = o;
  deep.model = model;
  deep.load_weights.clear();
  const MLP net = build_model(deep, device);
  std::vector<Tensor> params = net.parameters();
  for (Tensor& w : params) round_(w, p);
  const Dataset data = make_synthetic(std::min<int64_t>(deep.batch, 4096), net.widths().front(), net.widths().back(), deep.seed);
  const Batch batch = gather_batch(data, BatchSampler(data.size(), data.size(), false, 0).indices(0), device);
  Table t("one step of " + model + " (" + std::to_string(net.layers().size()) + " layers), batch " +
              std::to_string(batch.y.size()) + ", " + precision_name(p),
          {"--recompute", "segments", "peak activations", "predicted", "step time (median of 7)", "predicted", "grads = none's"});
  std::vector<float> reference;
  double none_seconds = 0;
  for (Recompute r : {Recompute::None, Recompute::EveryLayer, Recompute::Sqrt}) {
    for (Tensor& w : params) w.zero_grad();
    device.reset_peak();
    const double before = double(device.ledger().current(MemoryCategory::Activations));
    forward_backward(net, batch, p, 1.0f, r, nullptr);
    const double peak = double(device.ledger().peak(MemoryCategory::Activations)) - before;
    std::vector<Tensor> grad_tensors;
    for (const Tensor& w : params) grad_tensors.push_back(w.grad());
    const std::vector<float> grads = flatten(grad_tensors);  // copied to the host (from a GPU too)
    std::vector<double> times;  // the same step again, for its time only
    for (int rep = 0; rep < 7; ++rep) {
      for (Tensor& w : params) w.zero_grad();
      auto start = std::chrono::steady_clock::now();
      forward_backward(net, batch, p, 1.0f, r, nullptr);
      if (!device.is_host_memory()) gpu::synchronize(device.index());  // backward's kernels done, not only queued
      times.push_back(seconds_since(start));
    }
    std::nth_element(times.begin(), times.begin() + 3, times.end());
    const double seconds = times[3];
    const double predicted = predicted_activation_bytes(net, int64_t(batch.y.size()), p, r);
    if (r == Recompute::None) reference = grads, none_seconds = seconds;
    const bool same = grads.size() == reference.size() &&
                      std::memcmp(grads.data(), reference.data(), grads.size() * sizeof(float)) == 0;
    t.add_row({recompute_name(r), std::to_string(segment_bounds(int64_t(net.layers().size()), r).size() - 1),
               format_bytes(peak), format_bytes(predicted),
               fixed(1e3 * seconds, 1) + " ms (" + fixed(seconds / none_seconds, 2) + "x)",
               r == Recompute::None ? "1x" : "4/3 = 1.33x", r == Recompute::None ? "-" : same ? "bit for bit" : "NO"});
    v.near(std::string("--recompute ") + recompute_name(r) + ": peak activation bytes = what the ops keep", peak, predicted,
           1e-3, peak > predicted * (1 + 1e-3) ? "more than the ops keep: a checkpoint, or a segment's graph, still held?"
                                                : "counted per op (recompute.h); a few scalars besides");
    if (r != Recompute::None)
      v.holds(std::string("--recompute ") + recompute_name(r) + ": the gradients are no recomputation's, bit for bit",
              same, same ? "" : "a recomputed segment gave other gradients");
  }
  if (say.enabled()) t.print(std::cout);
  say.say("Predicted time: forward F, backward 2F (two GEMMs per layer for one); recomputing runs every\n"
          "segment's forward twice, 4F instead of 3F. Measured with rounding (16-bit) and bookkeeping that are not\n"
          "GEMMs, on a shared CPU or a GPU busy launching small kernels: no verdict on time, the bytes are exact.");
}

}  // namespace dpt::ch11
