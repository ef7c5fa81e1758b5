// gradient_checks.cpp — chapter 01's section 2: backward() against finite
// differences, your linear_backward and softmax_cross_entropy_backward
// against autograd.
#include "gradient_checks.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "ch01.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"

using namespace dpt;

// Central differences on the 5 largest-gradient entries of every parameter:
// the oracle that shares no code with autograd. Returns the worst
// |numeric − autograd| / (kFdAbsolute + kFdRelative·|numeric|); 1 is the limit.
// The absolute term covers float32 rounding of the loss (ulp 2.4e-7 at 2.3,
// differenced over 2·eps = 2e-3: a few × 1e-4), the relative one truncation
// (docs/ch01_sgd.md). A nudge across a ReLU kink (one-sided slopes disagree by
// over twice the bound: the loss alone decides, never autograd) is skipped.
constexpr double kFdAbsolute = 1e-3, kFdRelative = 1e-2;
double finite_difference_check(const MLP& model, const Batch& batch, const Narrator& say) {
  for (auto& p : model.parameters()) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  NoGradGuard no_grad;
  auto loss = [&] { return double(softmax_cross_entropy(model.forward(batch.x), batch.y).item()); };
  const float eps = 1e-3f;
  const double at = loss();
  double worst = 0;
  Table table("finite differences vs backward() (worst of the 5 largest-gradient entries per parameter)",
              {"parameter", "autograd", "numeric", "|difference|", "bound", "kinks skipped"});
  for (auto& named : model.named_parameters()) {
    Tensor p = named.tensor;
    std::vector<float> grad = p.grad().to_vector();
    std::vector<int64_t> order(grad.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
    const std::size_t checked = std::min<std::size_t>(5, order.size());
    std::partial_sort(order.begin(), order.begin() + checked, order.end(),
                      [&](int64_t a, int64_t b) { return std::abs(grad[a]) > std::abs(grad[b]); });
    double ratio = -1, shown_auto = 0, shown_num = 0;
    int kinks = 0;
    for (std::size_t k = 0; k < checked; ++k) {
      int64_t i = order[k];
      float saved = p.data()[i];
      p.data()[i] = saved + eps;
      double up = loss();
      p.data()[i] = saved - eps;
      double down = loss();
      p.data()[i] = saved;
      double numeric = (up - down) / (2 * eps), bound = kFdAbsolute + kFdRelative * std::abs(numeric);
      if (std::abs((up - at) - (at - down)) / eps > 2 * bound) {
        ++kinks;
        continue;
      }
      double r = std::abs(numeric - grad[i]) / bound;
      if (!(r <= ratio)) ratio = r, shown_auto = grad[i], shown_num = numeric;  // a NaN is the worst
    }
    if (!(ratio <= worst)) worst = ratio;
    table.add_row({named.name, fmt(shown_auto, 5), fmt(shown_num, 5), fmt(std::abs(shown_num - shown_auto), 2),
                   fmt(kFdAbsolute + kFdRelative * std::abs(shown_num), 2), std::to_string(kinks)});
  }
  for (auto& p : model.parameters()) p.zero_grad();
  if (say.enabled()) table.print(std::cout);
  return worst;
}

// max |a − expected| / max |expected|; NaN when a is missing or misshapen.
double relative_error(const Tensor& a, const Tensor& expected) {
  if (!a.defined() || a.shape() != expected.shape()) return NAN;
  double largest = max_abs_diff(expected, Tensor::zeros(expected.shape(), expected.device()));
  return max_abs_diff(a, expected) / std::max(largest, 1e-30);
}

// Your linear_backward on the last layer against autograd through the core's
// own `linear` op, which shares no code with yours.
LinearErrors check_linear_backward(const MLP& model, const Batch& batch) {
  Tensor weight = model.layers().back().weight, bias = model.layers().back().bias;
  Tensor h = batch.x;  // (B, in): the input of the last layer
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i + 1 < model.layers().size(); ++i) h = relu(model.layers()[i].forward(h));
  }
  // dy = d loss / d logits (B, out), read off a leaf copy of the logits.
  Tensor logits = linear(h, weight, bias).clone().set_requires_grad(true);
  softmax_cross_entropy(logits, batch.y).backward();
  ch01::LinearGrads mine = ch01::linear_backward(h, weight, logits.grad());
  // Autograd on the same layer, from a leaf copy of h so that h gets a gradient too.
  Tensor x = h.clone().set_requires_grad(true);
  weight.zero_grad(), bias.zero_grad();
  softmax_cross_entropy(linear(x, weight, bias), batch.y).backward();
  LinearErrors errors{relative_error(mine.dx, x.grad()), relative_error(mine.dweight, weight.grad()),
                      relative_error(mine.dbias, bias.grad())};
  for (auto& p : model.parameters()) p.zero_grad();
  return errors;
}


// Your softmax_cross_entropy_backward at the model's logits against autograd
// through the core's own softmax_cross_entropy, which shares no code with yours.
double check_loss_backward(const MLP& model, const Batch& batch) {
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = model.forward(batch.x);
  }
  // The probe's logits, then the same rows moved to about +1000 (even rows)
  // and -1000 (odd rows): the contract's range, where exp() of a logit
  // overflows or underflows a float. The worse of the two errors counts.
  std::vector<float> far = logits.to_vector();
  const int64_t classes = logits.size(1);
  for (std::size_t k = 0; k < far.size(); ++k) far[k] += (int64_t(k) / classes) % 2 == 0 ? 1000.0f : -1000.0f;
  double worst = 0;
  for (const Tensor& z : {logits, Tensor::from_vector(logits.shape(), far, logits.device())}) {
    Tensor mine = ch01::softmax_cross_entropy_backward(z, batch.y);
    Tensor leaf = z.clone().set_requires_grad(true);
    softmax_cross_entropy(leaf, batch.y).backward();
    const double error = relative_error(mine, leaf.grad());  // a NaN or inf in yours makes it NaN
    if (!(error <= worst)) worst = error;
  }
  return worst;
}
