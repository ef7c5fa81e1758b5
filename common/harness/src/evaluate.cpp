// evaluate.cpp — loss and accuracy over a data set, and the held-out report.
#include "dpt/evaluate.h"

#include <algorithm>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/ops.h"
#include "dpt/report.h"

namespace dpt {

// ----------------------------------------------------------------------------
// scoring: forward only, chunk by chunk, weighted by chunk size

Evaluation evaluate(const MLP& model, const Dataset& data, int64_t chunk) {
  DPT_CHECK(data.size() > 0, "cannot evaluate on an empty data set");
  DPT_CHECK(data.features() == model.widths().front(),
            "evaluating a model with " << model.widths().front() << " inputs on data with " << data.features()
                                       << " features");
  NoGradGuard no_grad;  // no graph: nothing here can reach a gradient
  Device& device = model.parameters().front().device();
  Evaluation result;
  const int64_t n = data.size();
  for (int64_t begin = 0; begin < n; begin += chunk) {
    int64_t end = std::min(n, begin + chunk);
    Tensor x = data.x.rows(begin, end).to(device);  // (chunk, D)
    std::vector<int64_t> y(data.y.begin() + begin, data.y.begin() + end);
    Tensor logits = model.infer(x);  // (chunk, classes); evaluation mode: batch norm by its running statistics
    double weight = double(end - begin) / double(n);
    result.loss += weight * softmax_cross_entropy(logits, y).item();
    result.accuracy += weight * accuracy(logits, y);
  }
  return result;
}

HeldOutScore score_held_out(const MLP& model, const Dataset& train, const HeldOut& held_out) {
  HeldOutScore score;
  score.train = evaluate(model, train);
  if (held_out.enabled()) score.test = evaluate(model, held_out.data);
  return score;
}

// ----------------------------------------------------------------------------
// the report: two summary rows and one metrics line

HeldOutScore report_held_out(const MLP& model, const Dataset& train, const HeldOut& held_out, int64_t steps,
                             const std::string& metrics_path, Table& summary) {
  HeldOutScore s = score_held_out(model, train, held_out);
  auto percent = [](double a) { return fixed(100 * a, 1) + "%"; };
  if (held_out.enabled()) {
    summary.add_row({"loss: training set / held-out", fixed(s.train.loss, 4) + " / " + fixed(s.test.loss, 4)});
    summary.add_row({"accuracy: training set / held-out", percent(s.train.accuracy) + " / " + percent(s.test.accuracy)});
    summary.add_row({"held-out set", held_out.description});
  } else {
    summary.add_row({"loss / accuracy on the training set", fixed(s.train.loss, 4) + " / " + percent(s.train.accuracy)});
    summary.add_row({"held-out set", "none (--eval-samples 0)"});
  }
  MetricsWriter metrics(metrics_path, /*append=*/true);
  std::map<std::string, double> line = {{"train_loss", s.train.loss}, {"train_accuracy", s.train.accuracy},
                                        {"test_samples", double(held_out.data.size())}};
  if (held_out.enabled()) line.insert({{"test_loss", s.test.loss}, {"test_accuracy", s.test.accuracy}});
  metrics.write(steps, line);
  return s;
}

}  // namespace dpt
