// checks.cpp — chapter 11's verdicts on its training runs, and running a
// part past an unwritten hole (checks.h).
#include "checks.h"

#include "dpt/check.h"
#include "sections.h"

namespace dpt::ch11 {

namespace {
/// bf16 and fp16 with scaling must end within this many points of fp32's
/// held-out accuracy. A run rounded differently is a different run, like
/// another seed: fp32 at the tour's settings scored 81.2, 81.5, 82.0, 80.7,
/// 82.5 % with seeds 1–5 (σ ≈ 0.7 points), so two runs differ with σ ≈ 1.0;
/// measured 16-bit − fp32 at equal seeds: bf16 −0.2 … +0.5, fp16 −1.9 … +0.3.
/// 2.5σ of the difference: a correct run fails about 1 time in 100, and the
/// planted mistakes that cost accuracy cost tens of points.
constexpr double kAccuracyMargin = 2.5;
/// fp16 without scaling leaves at least this fraction of its non-zero
/// gradient entries below its smallest normal (measured 1.3 % on synthetic
/// data, 4.8–5.6 % on Fashion-MNIST at 100–300 steps); with scaling, ten
/// times fewer. Some of them are flushed to 0 (measured 7e-6 to 3e-4).
constexpr double kTinyShown = 0.005;
}  // namespace

bool Parts::run(const std::function<void()>& part, const std::string& what) {
  try {
    if (holes_.run_here(part)) return true;
    say_.say("  (stopped: " + holes_.last() + ")");
  } catch (const Error& e) {  // e.g. a recompute_backward that stops: a ✘ that says what it said
    v_.holds(what, false, e.what());
  }
  return false;
}

void Parts::judge() const { holes_.judge(v_); }

std::vector<Setting> settings_to_train(const Setting& mine, bool compare, int64_t growth_interval, std::size_t& mine_at) {
  std::vector<Setting> settings;
  if (compare) {
    settings.push_back({Precision::FP32, parse_loss_scale("none", growth_interval), "none"});
    settings.push_back({Precision::BF16, parse_loss_scale("none", growth_interval), "none"});
    settings.push_back({Precision::FP16, parse_loss_scale("dynamic", growth_interval), "dynamic"});
    settings.push_back({Precision::FP16, parse_loss_scale("none", growth_interval), "none"});
  }
  for (mine_at = 0; mine_at < settings.size(); ++mine_at)
    if (settings[mine_at].name() == mine.name()) return settings;
  settings.push_back(mine);
  return settings;
}

void judge_training(const Options& o, const std::vector<Setting>& settings,
                    const std::vector<std::optional<MixedRun>>& runs, const std::vector<double>& accuracy,
                    bool compared, bool scored, Verdicts& v) {
  for (std::size_t i = 0; i < settings.size(); ++i) {
    if (!runs[i]) continue;
    const Setting& s = settings[i];
    const MixedRun& r = *runs[i];
    const BytesPerParam want = formula_bytes(s.precision, o.optimizer);
    if (r.skipped() < o.steps)  // the optimizer allocates its moments at its first step
      v.near(s.name() + ": model-state bytes per parameter = " + fmt(want.params, 3) + " + " + fmt(want.grads, 3) + " + " +
               fmt(want.state, 3), r.measured.total(), want.total(), 1e-9,
           "weights and gradients at the format's width, master copy and moments in fp32");
    if (s.precision == Precision::FP32) continue;
    bool representable = true;
    for (const Tensor& w : r.model.parameters())
      for (float x : w.to_vector()) representable = representable && round_to(s.precision, x) == x;
    v.holds(s.name() + ": the weights forward reads are " + precision_name(s.precision) + " values", representable,
            representable ? "" : "a weight is not a " + std::string(precision_name(s.precision)) + " value: each must be its master rounded");
    v.holds(s.name() + ": a skipped step left weights, masters and optimizer state bit-identical", r.skipped_changed == 0,
            std::to_string(r.skipped_changed) + " of " + std::to_string(r.skipped()) + " skipped steps changed a bit");
    v.at_most(s.name() + ": fraction of steps skipped for overflow", double(r.skipped()) / double(o.steps), 0.05,
              "a dynamic scaler skips a few steps while it finds its scale; more: the scale or the format overflows");
    const std::string departure = s.scaler.dynamic ? scale_departure(s, r) : "";
    if (s.scaler.dynamic)
      v.holds(s.name() + ": the scale kept the scaler's laws (ch11.h) at every step", departure.empty(),
              departure.empty() ? std::to_string(r.scales.size()) + " steps, growth interval " +
                                      std::to_string(s.scaler.growth_interval)
                                : departure);
  }
  if (!compared) return;
  const std::size_t fp32 = 0, bf16 = 1, fp16 = 2, fp16_none = 3;  // settings_to_train's order
  if (scored)
    for (std::size_t i : {bf16, fp16})
      v.at_least(settings[i].name() + ": held-out accuracy minus fp32's (points)", accuracy[i] - accuracy[fp32],
                 -kAccuracyMargin, "2.5x the spread of two fp32 runs with other seeds (sigma ~1 point), argued in checks.cpp");
  const Flushes& none = runs[fp16_none]->flushes;
  v.at_least("fp16, no scaling: gradient entries flushed to 0 (flagged: underflow), of " + std::to_string(none.nonzero),
             double(none.flushed), 1, "fp16 flushes |g| <= 2^-25 to 0: " + fmt(100 * none.fraction(), 2) + " % lost");
  v.at_least("fp16, no scaling: gradient entries below fp16's smallest normal (flagged)", none.tiny_fraction(),
             kTinyShown, "below 2^-14 fp16 keeps fewer than 11 bits of a gradient, down to none");
  v.at_most("fp16 + dynamic scaling: entries below normal, as a fraction of the unscaled run's",
            runs[fp16]->flushes.tiny_fraction(), none.tiny_fraction() / 10,
            "scaling by S lifts gradients out of fp16's underflow range");
}

}  // namespace dpt::ch11
