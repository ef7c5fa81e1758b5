// chapters/02_batching/checks.cpp — chapter 02's checks (checks.h).
#include "checks.h"

#include <cmath>
#include <iostream>

#include "ch02.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

// Your per_sample_gradients on the batch: each returned sample's gradient
// against autograd on that sample alone (after the call, so a kept gradient
// written into while the mean was formed shows), and the mean against one
// backward over the whole batch. Worst relative errors over the parameters
// (NaN when a list or a shape is wrong).
GradientErrors compare_gradients(const MLP& model, const Batch& batch, const Narrator& say) {
  std::vector<Tensor> params = model.parameters();
  GradientErrors worst;
  params.front().add_grad_ready_hook([&worst](Tensor&) { ++worst.passes; });  // once per backward()
  PerSampleGradients yours = per_sample_gradients(model, batch);
  params.front().clear_grad_ready_hooks();
  auto relative = [](const Tensor& mine, const Tensor& truth) {
    double largest = max_abs_diff(truth, Tensor::zeros(truth.shape(), truth.device()));
    double diff = mine.defined() && mine.shape() == truth.shape() ? max_abs_diff(mine, truth) : NAN;
    return diff / std::max(largest, 1e-30);
  };
  const int64_t count = batch.x.size(0);
  worst.samples = int64_t(yours.samples.size()) == count ? 0.0 : NAN;
  for (int64_t i = 0; i < count && i < int64_t(yours.samples.size()); ++i) {
    for (auto& p : params) p.zero_grad();
    softmax_cross_entropy(model.forward(batch.x.rows(i, i + 1)), {batch.y[std::size_t(i)]}).backward();
    if (yours.samples[std::size_t(i)].size() != params.size()) worst.samples = NAN;
    for (std::size_t p = 0; p < params.size() && p < yours.samples[std::size_t(i)].size(); ++p) {
      double r = relative(yours.samples[std::size_t(i)][p], params[p].grad());
      if (!(r <= worst.samples)) worst.samples = r;  // a NaN is the worst
    }
  }
  for (auto& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();  // one pass, all B samples
  Table table("mean of " + std::to_string(count) + " per-sample gradients vs one batch gradient",
              {"parameter", "max |mean - batch|", "max |batch|"});
  worst.mean = yours.mean.size() == params.size() ? 0.0 : NAN;
  auto names = model.named_parameters();
  for (std::size_t p = 0; p < params.size() && p < yours.mean.size(); ++p) {
    Tensor batch_grad = params[p].grad();
    double largest = max_abs_diff(batch_grad, Tensor::zeros(batch_grad.shape(), batch_grad.device()));
    double r = relative(yours.mean[p], batch_grad);
    table.add_row({names[p].name, fmt(r * largest, 3), fmt(largest, 3)});
    if (!(r <= worst.mean)) worst.mean = r;  // a NaN is the worst
  }
  for (auto& p : params) p.zero_grad();
  if (say.enabled()) table.print(std::cout);
  return worst;
}

// Your accumulated_gradient in `micro_batches` pieces against one backward
// over the whole batch: the worst max |accumulated − batch| / max |batch|
// over the parameters (NaN when a list or a shape is wrong).
double compare_accumulation(const MLP& model, const Batch& batch, int micro_batches) {
  Gradients mine = accumulated_gradient(model, batch, micro_batches);
  std::vector<Tensor> params = model.parameters();
  for (auto& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();  // one pass, the whole batch
  double worst = mine.size() == params.size() ? 0.0 : NAN;
  for (std::size_t p = 0; p < params.size() && p < mine.size(); ++p) {
    Tensor whole = params[p].grad();
    double largest = max_abs_diff(whole, Tensor::zeros(whole.shape(), whole.device()));
    double diff = mine[p].defined() && mine[p].shape() == whole.shape() ? max_abs_diff(mine[p], whole) : NAN;
    if (!(diff / std::max(largest, 1e-30) <= worst)) worst = diff / std::max(largest, 1e-30);  // a NaN is the worst
  }
  for (auto& p : params) p.zero_grad();
  return worst;
}

void add_verdicts(Verdicts& v, const Measured& c, const std::string& optimizer, const Narrator& say) {
  v.at_most("your per-sample gradients, as returned, vs autograd on each sample alone, max |difference| / max",
            c.gradients.samples, 1e-5,
            "the same float ops on the same row: ~1e-7; a gradient left over from earlier samples, or a kept "
            "gradient written into afterwards, is off by O(1)");
  v.holds("your per_sample_gradients: one backward pass per sample, none over the whole batch",
          c.gradients.passes == c.batch_rows,
          str(c.gradients.passes, " passes for ", c.batch_rows,
              " samples: the mean is built from the per-sample gradients"));
  v.at_most("your mean of the per-sample gradients vs the batch gradient, max |difference| / max |batch|",
            c.gradients.mean, 1e-4,
            "float32 sums in another order: ~B*6e-8; a sum instead of a mean is off by B-1, a lost sample by 1/B");
  v.at_most("your accumulated_gradient in " + std::to_string(c.micro_batches) +
                " micro-batches vs the batch gradient, max |difference| / max |batch|",
            c.accumulation, 1e-4,
            "float32 sums in another order: ~1e-6; a piece weighed wrongly, or a piece lost: 1e-2 and more");
  const std::string b = std::to_string(c.batch_size);
  v.holds(b + "x fewer optimizer steps (in chapter 03: syncs) with batches of " + b,
          c.per_sample_updates == c.batch_size * c.batched_updates,
          str(c.per_sample_updates, " per-sample steps vs ", c.batched_updates));
  double drop = c.loss_before - c.batched_loss;  // no drop, no comparison: +inf fails
  if (optimizer == "sgd")
    v.at_most("|per-sample run's loss - batched run's loss| / batched run's loss drop",
              drop > 0 ? std::fabs(c.per_sample_loss - c.batched_loss) / drop : INFINITY, 0.1,
              "equal to first order in lr (measured 0.1-0.3%); a summed loss steps B times too far");
  else
    say.say("(" + optimizer + " is not linear in the gradient, so B steps at lr/B are not one step of B at lr:\n"
            "the two runs are not compared; chapter 06 shows why.)");
  v.at_most("batched run, loss on the data set after / before", c.batched_loss / c.loss_before, 0.99,
            "a run that learns ends at least 1% lower");
  v.at_most("largest step loss / first step loss, both runs",
            c.loss_growth, 1e6,
            "a loss a million times its start has diverged, finite or not (try a smaller --lr)");
}

}  // namespace dpt::ch02
