// chapters/06_averaging/checks.cpp — chapter 06's verdicts (checks.h).
#include "checks.h"

#include <algorithm>
#include <string>

#include "dpt/data_parallel.h"
#include "dpt/flatten.h"

namespace dpt::ch06 {

namespace {
/// Adam at H = 1 must differ from gradient averaging by more than this: 10×
/// the float-rounding bound (kSingleDeviceTolerance) that SGD and momentum
/// stay under. Adam's step is ~lr per coordinate whichever gradient it sees,
/// so the two drift apart by ~lr·steps; the default run shows ~1e-2.
constexpr double kAdamDiffers = 10 * kSingleDeviceTolerance;
}  // namespace

void add_tour_verdicts(Lecture& lec, const std::vector<Setting>& settings, const TourRuns& runs, const Ch06Flags& f) {
  const Options& o = lec.o;
  const Context& ctx = lec.ctx();
  Verdicts& v = lec.verdicts;
  const int64_t e = std::min(o.steps, f.equivalence_steps);
  auto find = [&](const std::string& name) -> const Setting& {
    for (const Setting& s : settings) if (s.name == name) return s;
    return settings.back();
  };
  auto grads_of = [&](const std::string& opt) { return find(make_setting(o, opt, false, 1, 0, false, f.adam_lr, e).name); };
  auto h1_of = [&](const std::string& opt) {
    return find(make_setting(o, opt, true, 1, 0, f.schedule.average_state, f.adam_lr, e).name);
  };
  const int64_t psi = int64_t(runs.grads_ref.weights.size());
  std::string diverged, unwritten;
  for (const Setting& s : settings) {
    if (!s.written) unwritten += (unwritten.empty() ? "" : ", ") + s.name;
    else if (s.run.diverged_step >= 0) diverged += (diverged.empty() ? "" : ", ") + s.name + " at step " + std::to_string(s.run.diverged_step);
    else if (s.schedule.parameters || &s == &runs.grads_ref) add_run_verdicts(v, s, psi, ctx.world);
  }
  v.holds("every setting ran (holes written)", unwritten.empty(), unwritten.empty() ? "" : "not yet: " + unwritten);
  v.holds("every loss stayed finite", diverged.empty(), diverged.empty() ? "" : "not in " + diverged);
  if (lec.verify && runs.verified.written) {  // the oracle: one device, the global batch, the core's code
    Setting single = runs.verified;
    single.weights = flatten(train_single_device(single.o, lec.data, o.batch * ctx.world).parameters());
    add_single_device_verdict(v, weight_gap(single, runs.verified));
  }
  if (ctx.world == 1) {  // one rank: its own gradient is the mean, nothing can differ or drift
    v.cannot_fail("H=1 = gradient averaging (sgd, momentum), adam differs, replicas drift", on_one_rank(4));
    return;
  }
  if (f.compare && unwritten.empty()) {
    for (const char* opt : {"sgd", "momentum"})
      v.at_most(std::string("H=1 ") + opt + " = gradient averaging: max |w - w_grads|",
                weight_gap(h1_of(opt), grads_of(opt)), kSingleDeviceTolerance,
                "the update is linear in g: averaging after it = averaging g before it");
    v.at_least("H=1 adam differs from gradient averaging: max |w - w_grads|", weight_gap(h1_of("adam"), grads_of("adam")),
               kAdamDiffers, "m/sqrt(v) is not linear in g: the mean of updates is not the update of the mean");
  }
  if (runs.local)
    v.at_least(runs.local->name + ": replicas drift apart between averagings, max |w_r - w_0|",
               max_over(runs.local->run.drift), 1e-6, "each replica steps on its own shard's gradient");
}

}  // namespace dpt::ch06
