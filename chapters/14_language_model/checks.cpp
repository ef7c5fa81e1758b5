// checks.cpp — chapter 14's verdicts (checks.h).
#include "checks.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "dpt/autograd.h"
#include "dpt/comm.h"
#include "schedule_verdicts.h"

using dpt::Tensor;

double unigram_entropy(const Corpus& text) {
  std::map<int64_t, double> counts;
  for (int64_t t : text.train) counts[t] += 1;
  double h = 0, n = double(text.train.size());
  for (auto& [token, c] : counts) h -= c / n * std::log(c / n);
  return h;
}

void add_model_verdicts(dpt::Verdicts& verdicts, const Gpt& model, double first_loss) {
  const GptShape& s = model.shape();
  verdicts.near("parameters = 12·L·C² + 13·L·C + 2·V·C + T·C + 2·C", double(model.num_parameters()),
                double(gpt_parameter_count(s)), 0, "counted tensor by tensor against the formula: exact");
  // Initial logits are lm_head rows N(0, 0.02²) against ln_f's unit-variance
  // rows: std σ = 0.02·√C, so over draws of the head the first loss is
  // ln V + σ²/2 + O(σ⁴) nats; one draw moves the target's mean logit by up to
  // ~σ (x carries its token, which the next one depends on). An init of std
  // 0.1 (σ = 1.1 at C = 128) or a broken softmax lands far outside.
  const double sigma = 0.02 * std::sqrt(double(s.width));
  verdicts.at_most("the first loss is ln V + σ²/2 (σ = 0.02·√C: near-uniform guesses), |Δ| in nats",
                   std::fabs(first_loss - (std::log(double(s.vocab)) + sigma * sigma / 2)), sigma,
                   "one random head shifts the target's logit by up to ~σ = " + std::to_string(sigma).substr(0, 5));
}

namespace {
// One device's gradient on step `c.step`'s global batch, from the weights before it.
std::vector<float> one_device_gradient(const Gpt& replica, const CheckedStep& c, const Corpus& text,
                                       const Ch14Flags& f, int world) {
  dpt::Rng unused(0);
  Gpt one(replica.shape(), dpt::Device::host(), unused);
  set_flat_values(one, c.weights_before);
  const int64_t G = f.batch * world;
  const dpt::WindowSampler sampler(int64_t(text.train.size()), f.shape.context, G, !f.no_shuffle, f.seed);
  dpt::TokenBatch all = dpt::window_batch(text.train, sampler.starts(c.step), f.shape.context);
  one.loss(all.inputs, all.targets, G).backward();
  std::vector<float> out;
  for (const Tensor& p : one.parameters()) {
    std::vector<float> g = p.grad().to_vector();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}
}  // namespace

void add_run_verdicts(dpt::Context& ctx, dpt::Verdicts& verdicts, const Gpt& replica, const LmRun& run,
                      const Corpus& text, const Ch14Flags& f) {
  // Replicas equal: every rank's weights against rank 0's (collective).
  std::vector<float> mine = flat_values(replica);
  std::vector<float> root = mine;
  ctx.comm.broadcast(root.data(), int64_t(root.size()), 0);
  float spread = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) spread = std::max(spread, std::fabs(mine[i] - root[i]));
  std::vector<float> worst{spread};
  ctx.comm.all_reduce(worst.data(), 1, dpt::ReduceOp::Max);
  if (!run.layout.empty())  // --sync buckets: chapter 05's verdicts on the schedule it recorded (collective)
    dpt::ch05::add_schedule_verdicts(ctx, run.layout, run.bucket_steps, /*overlap=*/true, verdicts);
  if (!ctx.is_root()) return;
  if (ctx.world == 1) {
    verdicts.cannot_fail("replicas hold the same weights after the last step", dpt::on_one_rank(4));
  } else {
    verdicts.at_most("replicas hold the same weights after the last step (max |w_r − w_0|)", worst[0], 0,
                     "every rank applies the same averaged gradient to the same weights: bit for bit");
  }
  for (const CheckedStep& c : run.checked) {
    std::vector<float> expected = one_device_gradient(replica, c, text, f, ctx.world);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      diff = std::max(diff, double(std::fabs(expected[i] - c.averaged_gradient[i])));
      scale = std::max(scale, double(std::fabs(expected[i])));
    }
    verdicts.at_most("step " + std::to_string(c.step) + ": averaged gradient = one device's on the global batch " +
                         "(max |Δ| / max |g|)",
                     diff / scale, 1e-4,
                     "the same sums in another order: ~1e-6 relative; a sum for a mean is off by ×D, a lost replica by 1/D");
  }
  if (!run.held_out.empty()) {
    const double h1 = unigram_entropy(text);
    verdicts.at_most("held-out loss after training is below the text's character entropy H₁ (context was learned)",
                     run.held_out.back().loss, h1,
                     "H₁ = " + std::to_string(h1).substr(0, 5) + " nats: the best loss of a model that ignores context");
  }
}
