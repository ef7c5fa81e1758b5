// lm_training.cpp — chapter 14's data-parallel training loop (lm_training.h).
#include "lm_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "ch05_flags.h"
#include "dpt/autograd.h"
#include "dpt/data_parallel.h"
#include "dpt/memory_ledger.h"
#include "dpt/optim.h"
#include "dpt/report.h"

using dpt::Tensor;

std::unique_ptr<dpt::Optimizer> make_lm_optimizer(const Ch14Flags& f, std::vector<Tensor> params) {
  if (f.optimizer == "sgd") return std::make_unique<dpt::SGD>(std::move(params), f.lr);
  return std::make_unique<dpt::Adam>(std::move(params), f.lr, 0.9f, 0.999f, 1e-8f, f.weight_decay, /*decoupled=*/true);
}

namespace {
std::vector<std::string> parameter_names(const Gpt& model) {
  std::vector<std::string> names;
  for (const dpt::NamedTensor& p : model.named_parameters()) names.push_back(p.name);
  return names;
}

std::vector<float> flat_gradients(const Gpt& model) {
  std::vector<float> out;
  for (const Tensor& p : model.parameters()) {
    std::vector<float> g = p.grad().defined() ? p.grad().to_vector() : std::vector<float>(std::size_t(p.numel()), 0.0f);
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}
}  // namespace

std::vector<float> flat_values(const Gpt& model) {
  std::vector<float> out;
  for (const Tensor& p : model.parameters()) {
    std::vector<float> v = p.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void set_flat_values(Gpt& model, const std::vector<float>& values) {
  std::size_t at = 0;
  for (Tensor& p : model.parameters()) {
    std::vector<float> part(values.begin() + std::ptrdiff_t(at), values.begin() + std::ptrdiff_t(at + std::size_t(p.numel())));
    p.copy_from(Tensor::from_vector(p.shape(), part, dpt::Device::host()));
    at += std::size_t(p.numel());
  }
}

double held_out_loss(const Gpt& model, const Corpus& text, const Ch14Flags& f) {
  dpt::NoGradGuard no_grad;
  const int64_t T = f.shape.context, B = f.batch;
  const std::vector<int64_t> starts = dpt::evaluation_starts(int64_t(text.held_out.size()), T, f.eval_batches * B);
  double total = 0;  // every window has T targets: the mean over windows is the mean over characters
  for (std::size_t at = 0; at < starts.size(); at += std::size_t(B)) {
    const std::vector<int64_t> part(starts.begin() + std::ptrdiff_t(at),
                                    starts.begin() + std::ptrdiff_t(std::min(starts.size(), at + std::size_t(B))));
    dpt::TokenBatch w = dpt::window_batch(text.held_out, part, T);
    total += model.loss(w.inputs, w.targets, w.windows).item() * double(w.windows);
  }
  return starts.empty() ? std::nan("") : total / double(starts.size());
}

LmRun train_language_model(dpt::Context& ctx, Gpt& model, const Corpus& text, const Ch14Flags& f, bool verify,
                           const dpt::Narrator& say) {
  LmRun run;
  const int64_t B = f.batch, D = ctx.world, G = B * D, T = f.shape.context;
  auto optimizer = make_lm_optimizer(f, model.parameters());
  const dpt::WindowSampler sampler(int64_t(text.train.size()), T, G, !f.no_shuffle, f.seed);
  dpt::ProgressBar bar("training", f.steps, say.enabled());
  std::unique_ptr<dpt::ch05::BucketedSync> buckets;  // --sync buckets: hooked on every parameter until it goes
  if (f.sync == "buckets") {
    const int64_t cap = dpt::ch05::mib_to_bytes(f.bucket_mb);
    buckets = std::make_unique<dpt::ch05::BucketedSync>(ctx, model.parameters(), parameter_names(model),
                                                        dpt::ch05::BucketPlan{cap, cap});
    run.layout = buckets->layout();
  }
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < f.steps; ++s) {
    const bool checked = verify && ctx.is_root() && (s == 0 || s == f.steps - 1);
    if (checked) run.checked.push_back({s, flat_values(model), {}});
    dpt::TokenBatch mine = dpt::window_batch(text.train, sampler.replica_starts(s, ctx.rank, ctx.world), T);
    optimizer->zero_grad();
    if (buckets) buckets->begin_step(s);
    Tensor loss;
    {
      dpt::MemoryScope scope(dpt::MemoryCategory::Activations);  // what the forward keeps for backward
      loss = model.loss(mine.inputs, mine.targets, B);
    }
    if (s == 0 && ctx.is_root()) run.peak_activation_bytes = ctx.device.ledger().current(dpt::MemoryCategory::Activations);
    if (buckets) {  // each replica's mean → the global batch's mean
      buckets->backward(loss);  // your buckets launch on your ring while backward goes on
      buckets->finish();
    } else {
      loss.backward();
      std::vector<Tensor> grads;
      for (const Tensor& p : model.parameters()) grads.push_back(p.grad());
      dpt::average_over_ranks(ctx.comm, grads);
    }
    std::vector<Tensor> losses{Tensor::scalar(loss.item(), ctx.device)};
    dpt::average_over_ranks(ctx.comm, losses);
    if (checked) run.checked.back().averaged_gradient = flat_gradients(model);
    optimizer->step();
    if (buckets) run.bucket_steps.push_back(buckets->summarise());
    run.train_loss.push_back(losses[0].item());
    if ((s + 1) % f.eval_every == 0 || s + 1 == f.steps)
      if (ctx.is_root() && f.eval_batches > 0) run.held_out.push_back({s + 1, held_out_loss(model, text, f)});
    bar.update(s + 1, "loss " + std::to_string(run.train_loss.back()).substr(0, 6));
  }
  bar.finish();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

std::string describe_buckets(const Gpt& model, const LmRun& run) {
  const std::vector<std::string> names = parameter_names(model);
  std::string out;
  for (std::size_t b = 0; b < run.layout.size(); ++b) {
    const dpt::ch05::Bucket& bucket = run.layout[b];
    out += dpt::str("  bucket ", b, ": ", bucket.params.size(), " tensors, ", dpt::format_bytes(double(bucket.bytes)),
                    ", ", names[std::size_t(bucket.params.front())]);
    if (bucket.params.size() > 1) out += " … " + names[std::size_t(bucket.params.back())];
    out += "\n";
  }
  double comm = 0, hidden = 0, backward = 0;
  for (const dpt::ch05::BucketStep& s : run.bucket_steps) comm += s.comm_s, hidden += s.hidden_s, backward += s.backward_s;
  const double n = double(std::max<std::size_t>(1, run.bucket_steps.size()));
  out += dpt::str("  per step on rank 0: backward ", dpt::fixed(1e3 * backward / n, 2), " ms, ring ",
                  dpt::fixed(1e3 * comm / n, 2), " ms, of which during backward ", dpt::fixed(1e3 * hidden / n, 2),
                  " ms (", dpt::fixed(100 * hidden / std::max(1e-12, comm), 0), " %)");
  return out;
}
