// step_check.cpp — record a data-parallel run's weights and synced gradients
// at chosen steps, then recompute each of those gradients on one device.
#include "dpt/step_check.h"

#include <cmath>
#include <sstream>
#include <string>

#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/kink_allowance.h"
#include "dpt/ops.h"
#include "dpt/verdict.h"

namespace dpt {

namespace {
double max_magnitude(const std::vector<float>& a) {
  double worst = 0;
  for (float x : a) worst = std::max(worst, std::fabs(double(x)));
  return worst;
}

}  // namespace

// ----------------------------------------------------------------------------
// recording: every step when the snapshots fit the budget, else every
// stride-th step, plus the last

void StepRecorder::record(int64_t step, int64_t steps, const std::vector<Tensor>& params) {
  if (!enabled_) return;
  std::vector<Tensor> grads;
  int64_t count = 0;
  for (const Tensor& p : params) {
    DPT_CHECK(p.grad().defined(), "StepRecorder: a parameter has no gradient at step " << step);
    grads.push_back(p.grad());
    count += p.numel();
  }
  if (!keeps(step, steps, count)) return;  // flatten (on a GPU: copies to the host) only what is kept
  recorded_.push_back({step, flatten(params), flatten(grads)});
}

void StepRecorder::record(int64_t step, int64_t steps, const float* weights, const float* grads, int64_t count) {
  if (!keeps(step, steps, count)) return;
  recorded_.push_back({step, std::vector<float>(weights, weights + count), std::vector<float>(grads, grads + count)});
}

bool StepRecorder::keeps(int64_t step, int64_t steps, int64_t count) {
  if (!enabled_) return false;
  if (steps_ == 0) {  // the plan, on the first call: how many snapshots (weights + gradients) fit the budget
    steps_ = steps;
    const auto fit = std::max<int64_t>(2, int64_t(double(budget_) / (8.0 * double(count))));
    stride_ = std::max<int64_t>(1, (steps + fit - 2) / (fit - 1));  // ≤ fit − 1 strided steps + the last
  }
  steps_run_ = step + 1;
  return step % stride_ == 0 || step == steps_ - 1;
}

// ----------------------------------------------------------------------------
// replaying: one device, from the recorded weights, on the step's whole batch

StepComparison compare_step_gradient(MLP& model, const Batch& batch, const std::vector<float>& synced) {
  std::vector<Tensor> params = model.parameters();
  for (Tensor& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  std::vector<Tensor> grads;
  for (Tensor& p : params) grads.push_back(p.grad());
  const std::vector<float> one = flatten(grads);
  DPT_CHECK(synced.size() == one.size(), "step check: the synced gradient has " << synced.size()
                                             << " entries, the model " << one.size());
  const KinkAllowance kinks = kink_allowance(model, batch);
  const double largest = max_magnitude(one), scale = largest > 0 ? largest : 1.0;
  StepComparison c;
  c.kink_units = kinks.units, c.kink_samples = kinks.samples;
  for (std::size_t i = 0; i < one.size(); ++i) {
    const double off = std::fabs(double(synced[i]) - double(one[i]));
    if (std::isnan(off)) return {std::nan(""), std::nan(""), c.kink_units, c.kink_samples};
    c.raw_difference = std::max(c.raw_difference, off / scale);
    c.difference = std::max(c.difference, (off - double(kinks.bound[i])) / scale);
  }
  return c;
}

StepCheck StepRecorder::replay(const Options& o, const Dataset& data, int64_t global_batch) const {
  StepCheck check;
  check.steps_run = steps_run_;
  if (!enabled_ || recorded_.empty()) return check;
  MLP model = build_model(o, Device::host());  // what the flags ask for: where the run must start
  std::vector<Tensor> params = model.parameters();
  if (recorded_.front().step == 0) check.start_difference = max_abs_difference(flatten(params), recorded_.front().weights);
  BatchSampler sampler(data.size(), global_batch, !o.no_shuffle, o.seed);
  for (const Snapshot& s : recorded_) {
    unflatten(s.weights, params);
    Batch batch = gather_batch(data, sampler.indices(s.step), Device::host());
    const StepComparison c = compare_step_gradient(model, batch, s.grads);
    check.checked.push_back(s.step);
    check.kink_units += c.kink_units, check.kink_samples += c.kink_samples;
    if (!(c.raw_difference <= check.raw_difference)) check.raw_difference = c.raw_difference;  // NaN wins
    if (std::isnan(c.difference) || c.difference > check.difference || check.worst_step < 0) {
      check.difference = c.difference, check.worst_step = s.step;
      if (std::isnan(c.difference)) break;
    }
  }
  return check;
}

std::string kink_note(const StepCheck& c) {
  if (c.kink_units == 0) return "";
  std::ostringstream note;
  note << "; " << c.kink_units << " ReLU input" << (c.kink_units == 1 ? "" : "s") << " in " << c.kink_samples
       << " sample" << (c.kink_samples == 1 ? "" : "s") << " sat within rounding of 0, their flips allowed"
       << " (without: " << c.raw_difference << ")";
  return note.str();
}

void add_local_batch_norm_report(Verdicts& v, const StepCheck& c) {
  if (!c.checked.empty() && c.checked.front() == 0)
    v.at_most("the replica started from the master copy: max |w - w_flags| before step 0", c.start_difference, 0,
              c.start_difference == 0 ? "the broadcast copies the master's bits"
                                      : "the weights the run started from are not the model the flags ask for");
  v.report("local BatchNorm: max |g - g_single| / max |g_single|, the averaged gradient against one device's on the "
               "global batch, over " + std::to_string(c.checked.size()) + " of " + std::to_string(c.steps_run) + " steps",
           c.raw_difference,
           "expected, not a mistake: each rank normalizes by its own shard's statistics, so data parallel is no "
           "longer one device on the global batch (--batchnorm sync normalizes by the global batch's)");
}

void add_step_check_verdicts(Verdicts& v, const StepCheck& c, const std::string& cause, bool judge_start) {
  if (judge_start && !c.checked.empty() && c.checked.front() == 0)  // not when the run resumed from a checkpoint
    v.at_most("the replica started from the master copy: max |w - w_flags| before step 0", c.start_difference, 0,
              c.start_difference == 0 ? "the broadcast copies the master's bits"
                                      : "the weights the run started from are not the model the flags ask for");
  const bool ok = std::isfinite(c.difference) && c.difference <= kStepGradientTolerance;
  const std::string which = std::to_string(c.checked.size()) + " of " + std::to_string(c.steps_run) + " steps";
  v.at_most("synced gradient = one device's on the global batch: max (|g - g_single| - kink allowance) / max |g_single| over " + which,
            c.difference, kStepGradientTolerance,
            ok ? "float sums in another order (~1e-6 relative; dpt/step_check.h)" + kink_note(c)
               : "at step " + std::to_string(c.worst_step) +
                     ", far above float rounding: " + cause);
}

}  // namespace dpt
