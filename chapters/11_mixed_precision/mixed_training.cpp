// mixed_training.cpp — chapter 11's loop (mixed_training.h).
#include "mixed_training.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/flatten.h"
#include "dpt/memory_ledger.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt::ch11 {

std::string Setting::name() const {
  const std::string p = precision_name(precision);
  const std::string r = recompute == Recompute::None ? "" : std::string(", recompute ") + recompute_name(recompute);
  if (precision == Precision::FP32 || loss_scale == "none") return p + (precision == Precision::FP32 ? "" : ", no scaling") + r;
  if (loss_scale == "dynamic") return p + " + dynamic scaling" + r;
  return p + " + static " + fmt(scaler.scale, 6) + r;
}

LossScaler parse_loss_scale(const std::string& text, int64_t growth_interval) {
  LossScaler s;
  s.growth_interval = growth_interval;
  if (text == "dynamic") return s;
  s.dynamic = false;
  if (text == "none") {
    s.scale = 1.0f;
    return s;
  }
  if (text.rfind("static:", 0) == 0) {
    const std::string number = text.substr(7);
    char* end = nullptr;
    const double v = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
    // S and 1/S must both be floats (S from about 5.9e-39 to 3.4e38).
    DPT_CHECK(end && *end == '\0' && std::isfinite(float(v)) && v > 0 && std::isfinite(1.0f / float(v)),
              "static:S needs a number S > 0 with S and 1/S finite floats (S from 5.9e-39 to 3.4e38), got '"
                  << number << "'");
    s.scale = float(v);
    return s;
  }
  throw Error("expected dynamic, static:S or none, got '" + text + "'");
}

BytesPerParam formula_bytes(Precision p, const std::string& optimizer) {
  const double moments = optimizer == "adam" || optimizer == "adamw" ? 2 : optimizer == "momentum" ? 1 : 0;
  if (p == Precision::FP32) return {4, 4, 4 * moments};
  return {2, 2, 4 + 4 * moments};  // the fp32 master copy is optimizer state (ZeRO's K = 12 with Adam)
}

int64_t MixedRun::skipped() const {
  int64_t n = 0;
  for (bool o : overflowed) n += o;
  return n;
}

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

MixedRun train_mixed(const Options& o, const Dataset& data, Device& device, const Setting& setting,
                     bool show_progress) {
  const Precision p = setting.precision;
  const MemoryLedger& ledger = device.ledger();
  auto now = [&](MemoryCategory c) { return double(ledger.current(c)); };
  const double params0 = now(MemoryCategory::Params), grads0 = now(MemoryCategory::Grads),
               state0 = now(MemoryCategory::OptimizerState);
  MixedRun run([&] {
    MemoryScope scope(MemoryCategory::Params);
    return build_model(o, device);
  }());
  std::vector<Tensor> params = run.model.parameters();
  for (Tensor& w : params) round_(w, p);  // the weights forward reads are 16-bit
  std::vector<Tensor> masters;            // fp32 copies the optimizer updates (16-bit runs)
  {
    MemoryScope scope(MemoryCategory::OptimizerState);
    if (p != Precision::FP32)
      for (const Tensor& w : params) masters.push_back(w.clone());
  }
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o.optimizer, p == Precision::FP32 ? params : masters, o.lr);
  LossScaler scaler = setting.scaler;
  BatchSampler sampler(data.size(), o.batch, !o.no_shuffle, o.seed);
  ProgressBar bar("ch11 " + setting.name(), o.steps, show_progress);
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < o.steps; ++step) {
    Batch batch = gather_batch(data, sampler.indices(step), device);
    for (Tensor& w : params) w.zero_grad();
    const bool half = p != Precision::FP32;
    run.losses.push_back(forward_backward(run.model, batch, p, half ? scaler.scale : 1.0f, setting.recompute,
                                          half ? &run.flushes : nullptr));
    run.scales.push_back(scaler.scale);
    if (!half) {  // the plain step of chapter 01
      require_finite_loss(run.losses.back(), step, o.lr);
      MemoryScope scope(MemoryCategory::OptimizerState);
      optimizer->step();
      run.overflowed.push_back(false);
    } else {
      {
        MemoryScope scope(MemoryCategory::Grads);
        for (Tensor& w : params) round_(w.grad(), p, &run.flushes);  // weight gradients stored in 16 bits
      }
      const std::vector<float> before = flatten(params), masters_before = flatten(masters),
                               state_before = flatten(optimizer->state_tensors());
      bool stepped;
      {
        MemoryScope scope(MemoryCategory::OptimizerState);
        stepped = master_step(params, masters, *optimizer, scaler.scale, p);
      }
      for (Tensor& m : masters) m.zero_grad();  // nothing master_step left in grad() carries into the next step
      run.overflowed.push_back(!stepped);
      if (!stepped && !(same_bits(before, flatten(params)) && same_bits(masters_before, flatten(masters)) &&
                        same_bits(state_before, flatten(optimizer->state_tensors()))))
        ++run.skipped_changed;
      update_loss_scale(scaler, !stepped);
    }
    bar.update(step + 1, "loss " + fixed(run.losses.back(), 4));
  }
  bar.finish();
  run.seconds = seconds_since(start);
  const double psi = double(run.model.num_parameters()), width = bytes_per_value(p);
  run.measured = {(now(MemoryCategory::Params) - params0) / 4 / psi * width,
                  (now(MemoryCategory::Grads) - grads0) / 4 / psi * width,
                  (now(MemoryCategory::OptimizerState) - state0) / psi};
  return run;
}

}  // namespace dpt::ch11
