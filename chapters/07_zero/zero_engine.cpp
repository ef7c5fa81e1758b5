// zero_engine.cpp — chapter 07's trainer: the flat layout, the zero_linear op
// (gather → compute → free, and the same again in backward), buckets that
// reduce-scatter as backward fills them, Adam on the owned shard, the loop.
//
// The flat buffers live on the rank's device, host memory (cpu:k) or a GPU
// (cuda:k): the host never reads them through a pointer. Arithmetic goes
// through the kernels of the memory they live in, copies through
// copy_floats/to_vector (dpt/floats.h), so both compute the same steps.
#include "zero_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/floats.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "dpt/report.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

// ----------------------------------------------------------------------------
// Adam on a flat range: the core's own Adam step (dpt::Adam's arithmetic, kernels.h)

void adam_update(const AdamConfig& c, int64_t t, float* p, const float* g, float* m, float* v, int64_t n) {
  if (n == 0) return;
  const int gpu = gpu_of(p);  // -1: host memory
  DPT_CHECK(gpu_of(g) == gpu && gpu_of(m) == gpu && gpu_of(v) == gpu,
            "adam_update: parameters, gradients, m and v must live in the same memory");
  AdamStep step = AdamStep{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.decoupled}.at_step(t);
  Kernels& kernels = gpu < 0 ? cpu_kernels() : cuda_kernels(gpu);  // the loop of the memory they live in
  kernels.adam_step(p, m, v, g, step, n);
}

namespace {
Tensor zeros_as(MemoryCategory category, int64_t n, Device& device) {
  MemoryScope scope(category);
  return Tensor::zeros({n}, device);
}

// Layers in reverse order (backward finishes the last first), closed when the
// next layer would push the bucket past the cap; a layer larger than the cap
// sits alone.
std::vector<LayerBucket> bucket_layers(const std::vector<Range>& layers, int64_t cap_bytes) {
  std::vector<LayerBucket> buckets;
  for (int l = int(layers.size()) - 1; l >= 0; --l) {
    const Range& r = layers[std::size_t(l)];
    if (buckets.empty() || 4 * (buckets.back().range.size() + r.size()) > cap_bytes)
      buckets.push_back({r, {}});
    buckets.back().range.begin = r.begin;
    buckets.back().layers.push_back(l);
  }
  return buckets;
}
}  // namespace

// ----------------------------------------------------------------------------
// one rank's state

struct ZeroTrainer::Impl {
  Context& ctx;
  ZeroPlan plan;
  Partition part;
  std::vector<int64_t> widths;
  std::vector<Range> layers;
  std::vector<LayerBucket> buckets;
  std::vector<int> bucket_of;          // layer → its bucket
  Tensor params, grads, m, v;          // full (padded) or a shard: see the table in zero_engine.h
  std::vector<Tensor> handles;         // per layer: an empty leaf that makes autograd call zero_linear's backward
  std::vector<Tensor> gathered;        // stage 3: layer → its gathered parameters, while needed
  std::vector<std::shared_ptr<Work>> prefetching;  // stage 3 --prefetch: layer → its gather in flight
  std::unique_ptr<gpu::Stream> gather_stream;      // on a GPU, --prefetch: where prefetched gathers run
  std::vector<char> on_gather_stream;              // layer → its gathered block came from gather_stream
  struct Retiring {                                // a released block of the gather stream's, and the
    Tensor block;                                  // compute stream's point after its last reads
    std::shared_ptr<gpu::Event> used;
  };
  std::vector<Retiring> retiring;
  std::vector<Tensor> open;            // stages 2, 3: bucket → its gradient buffer while it fills
  std::vector<int> missing;            // bucket → layers whose gradient has not arrived

  Impl(Context& c, const ZeroPlan& p) : ctx(c), plan(p) {}
  bool full_params() const { return plan.stage <= 2; }
  bool full_grads() const { return plan.stage <= 1; }
  int64_t own_begin() const { return ctx.rank * part.shard; }

  // ---- a layer's parameters: a view (stages 0–2) or gathered (stage 3)
  Tensor acquire(int l, int next) {
    if (full_params()) return params.slice(layers[std::size_t(l)].begin, layers[std::size_t(l)].size());
    wait_prefetch(l);
    retire();  // no gather runs now: the blocks released since the last one may go back
    if (!gathered[std::size_t(l)].defined()) {  // not prefetched: gather now, on the compute stream
      on_gather_stream[std::size_t(l)] = 0;
      gather_now(l);
    }
    if (plan.prefetch && next >= 0 && next < int(layers.size())) prefetch(next);
    return gathered[std::size_t(l)];
  }
  void prefetch(int l) {
    // Queued on the progress thread; the rank thread waits for it before it
    // talks again (acquire, or zero_linear_backward), so the two never
    // interleave messages on one communicator.
    if (ctx.device.is_host_memory()) {
      prefetching[std::size_t(l)] = ctx.comm.async([this, l] { gather_now(l); });
      return;
    }
    // On a GPU the gather runs on a stream of its own, as chapter 05's rings
    // do, so it overlaps the layer the compute stream is busy with (a gather
    // on the compute stream would first wait for that layer: every collective
    // waits for its caller's stream). It starts after `ready`: the compute
    // stream's work so far, Adam's last writes to the shard included. The job
    // synchronizes its stream before it completes, so the layer is on the GPU
    // when the rank thread's wait returns. Its block comes from the gather
    // stream's cache, and goes back there only through release() and
    // retire(), which order that stream after the compute stream's last reads.
    const int gpu = ctx.device.index();
    gpu::set_current_device(gpu);
    if (!gather_stream) gather_stream = std::make_unique<gpu::Stream>(gpu);
    on_gather_stream[std::size_t(l)] = 1;
    auto ready = std::make_shared<gpu::Event>();
    ready->record(gpu::current_stream(gpu));
    prefetching[std::size_t(l)] = ctx.comm.async([this, l, gpu, ready] {
      gpu::set_current_device(gpu);
      gather_stream->wait(*ready);  // on the GPU: the host goes on
      gpu::StreamGuard guard(*gather_stream);
      try {
        gather_now(l);
      } catch (...) {
        try {
          gather_stream->synchronize();  // nothing of it may still write once the error is out
        } catch (const std::exception&) {  // a GPU in error: the gather's own error is the one to tell
        }
        throw;
      }
      gather_stream->synchronize();
    });
  }
  void gather_now(int l) {
    auto span = ctx.trace.span("gather layer " + std::to_string(l), "comm");
    gathered[std::size_t(l)] = gather_layer(ctx.comm, part, layers[std::size_t(l)], params, ctx.device);
  }
  void release(int l, Tensor& full) {
    if (full_params()) return;
    full = Tensor();
    if (gather_stream && on_gather_stream[std::size_t(l)]) {
      // A block of the gather stream's goes back to that stream's cache, and
      // the next gather may take it while the compute stream still reads it:
      // it retires at the next retire(), when no gather runs, once the gather
      // stream has been made to wait for this point. (A wait queued now would
      // hold the gather in flight until this layer ends: no overlap.)
      gpu::set_current_device(ctx.device.index());
      auto used = std::make_shared<gpu::Event>();
      used->record(gpu::current_stream(ctx.device.index()));
      retiring.push_back({gathered[std::size_t(l)], used});
    }
    release_layer(gathered[std::size_t(l)]);
  }
  // Only while no gather runs (none queued, or just waited for).
  void retire() {
    for (const Retiring& r : retiring) gather_stream->wait(*r.used);
    retiring.clear();  // the blocks go back to the gather stream's cache
  }
  void wait_prefetch(int l) {
    if (l >= 0 && l < int(layers.size()) && prefetching[std::size_t(l)]) {
      prefetching[std::size_t(l)]->wait();
      prefetching[std::size_t(l)].reset();
    }
  }

  // ---- where layer l's gradient goes: the flat buffer, or its open bucket
  Tensor grad_destination(int l) {
    const Range& r = layers[std::size_t(l)];
    if (full_grads()) return grads.slice(r.begin, r.size());
    int b = bucket_of[std::size_t(l)];
    const Range& br = buckets[std::size_t(b)].range;
    if (!open[std::size_t(b)].defined()) open[std::size_t(b)] = zeros_as(MemoryCategory::Comm, br.size(), ctx.device);
    return open[std::size_t(b)].slice(r.begin - br.begin, r.size());
  }
  // Layer l's gradient is final: the bucket may leave (stages 2, 3).
  void gradient_ready(int l) {
    if (full_grads()) return;
    int b = bucket_of[std::size_t(l)];
    if (--missing[std::size_t(b)] > 0) return;
    auto span = ctx.trace.span("reduce-scatter bucket " + std::to_string(b), "comm");
    reduce_scatter_bucket(ctx.comm, part, buckets[std::size_t(b)].range, open[std::size_t(b)].data(), grads.data());
    open[std::size_t(b)] = Tensor();  // the full gradients of these layers are gone
  }

  // ---- the op: y = x Wᵀ + b, with W and b only present while used
  Tensor zero_linear(int l, const Tensor& x) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor full = acquire(l, l + 1), y;
    {
      auto span = ctx.trace.span("forward layer " + std::to_string(l), "compute");
      NoGradGuard no_graph;  // this op records itself below, holding x but not W
      y = linear(x, full.slice(0, out * in).reshape({out, in}), full.slice(out * in, out));
    }
    release(l, full);
    return record(y, "zero_linear", {x, handles[std::size_t(l)]},
                  [this, l, x](const Tensor& dy) -> std::vector<Tensor> { return zero_linear_backward(l, x, dy); });
  }
  // dx = dy W (B, in), dW = dyᵀ x (out, in), db = Σ_rows dy (out)
  std::vector<Tensor> zero_linear_backward(int l, const Tensor& x, const Tensor& dy) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor full = acquire(l, l - 1), dx;
    Tensor dest = grad_destination(l);
    {
      auto span = ctx.trace.span("backward layer " + std::to_string(l), "compute");
      Tensor dweight = dest.slice(0, out * in).reshape({out, in});
      gemm(dy, true, x, false, dweight);
      Tensor dbias = dest.slice(out * in, out);  // the core's linear() sums its bias gradient the same way
      kernels_for(ctx.device).sum_rows(dbias.data(), dy.data(), dy.size(0), out);
      if (x.requires_grad()) {
        dx = Tensor::empty(x.shape(), x.device());
        gemm(dy, false, full.slice(0, out * in).reshape({out, in}), false, dx);
      }
    }
    dest = Tensor();
    release(l, full);
    wait_prefetch(l - 1);  // the next layer's gather is done before this rank reduce-scatters
    gradient_ready(l);
    return {dx, Tensor()};
  }

  Tensor forward(const Tensor& x) {
    Tensor h = x;
    for (int l = 0; l < int(layers.size()); ++l) {
      h = zero_linear(l, h);
      if (l + 1 < int(layers.size())) h = relu(h);
    }
    return h;
  }

  // ---- after backward: the gradient sync and Adam on what this rank owns
  void update(int64_t t) {
    auto span = ctx.trace.span("sync + Adam on the owned shard", "comm");
    const int64_t S = part.shard, mine = own_begin();
    if (full_grads()) {  // stages 0, 1: the whole gradient is here; its mean's shard comes from a reduce-scatter
      std::vector<int64_t> bounds = shard_bounds(part, {0, part.padded});
      ring_reduce_scatter(ctx.comm, grads.data(), bounds);
      divide_floats(grads.data() + mine, S, float(part.world));  // the mean: a division, as in every stage
    }
    if (plan.stage == 0) {  // all-reduce = reduce-scatter + all-gather; then everyone updates everything
      ring_all_gather(ctx.comm, grads.data(), shard_bounds(part, {0, part.padded}));
      if (plan.observe_stage0) observe(t - 1);
      adam_update(plan.adam, t, params.data(), grads.data(), m.data(), v.data(), part.padded);
      return;
    }
    float* p = full_params() ? params.data() + mine : params.data();
    const float* g = full_grads() ? grads.data() + mine : grads.data();
    adam_update(plan.adam, t, p, g, m.data(), v.data(), S);
    if (full_params()) ring_all_gather(ctx.comm, params.data(), shard_bounds(part, {0, part.padded}));
  }
  // The observer reads host memory: on a GPU it gets copies of the Ψ floats,
  // made only for a step it wants (rank 0's recorder keeps a few steps).
  void observe(int64_t step) {
    if (plan.observe_stage0_wants && !plan.observe_stage0_wants(step, part.psi)) return;
    if (params.device().is_host_memory()) {
      plan.observe_stage0(step, params.data(), grads.data(), part.psi);
      return;
    }
    std::vector<float> p = params.slice(0, part.psi).to_vector(), g = grads.slice(0, part.psi).to_vector();
    plan.observe_stage0(step, p.data(), g.data(), part.psi);
  }
};

// ----------------------------------------------------------------------------
// the trainer

ZeroTrainer::ZeroTrainer(Context& ctx, const std::vector<int64_t>& widths, const std::vector<float>& initial,
                         const ZeroPlan& plan)
    : impl_(std::make_unique<Impl>(ctx, plan)) {
  DPT_CHECK(plan.stage >= 0 && plan.stage <= 3, "--stage must be 0, 1, 2 or 3, got " << plan.stage);
  Impl& s = *impl_;
  s.widths = widths;
  int64_t offset = 0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    int64_t n = widths[l] * widths[l + 1] + widths[l + 1];  // weight (out, in), then bias (out)
    layers_.push_back({offset, offset + n});
    offset += n;
  }
  DPT_CHECK(int64_t(initial.size()) == offset,
            "ZeRO: " << initial.size() << " initial parameters for a model of " << offset);
  part_ = partition_parameters(offset, ctx.world);
  s.part = part_, s.layers = layers_;
  const int64_t S = part_.shard, P = part_.padded, mine = ctx.rank * S;
  std::vector<float> padded(initial);
  padded.resize(std::size_t(P), 0.0f);  // the padding: < N zeros at the end, trained like the rest (stays 0)
  {
    MemoryScope scope(MemoryCategory::Params);
    s.params = s.full_params() ? Tensor::from_vector({P}, padded, ctx.device)
                               : Tensor::from_vector({S}, std::vector<float>(padded.begin() + mine, padded.begin() + mine + S),
                                                     ctx.device);
  }
  s.grads = zeros_as(MemoryCategory::Grads, s.full_grads() ? P : S, ctx.device);
  s.m = zeros_as(MemoryCategory::OptimizerState, plan.stage == 0 ? P : S, ctx.device);
  s.v = zeros_as(MemoryCategory::OptimizerState, plan.stage == 0 ? P : S, ctx.device);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    s.handles.push_back(Tensor::empty({0}, ctx.device));
    s.handles.back().set_requires_grad(true);
  }
  s.gathered.resize(layers_.size());
  s.prefetching.resize(layers_.size());
  s.on_gather_stream.assign(layers_.size(), 0);
  if (!s.full_grads()) {
    buckets_ = bucket_layers(layers_, plan.bucket_bytes);
    s.buckets = buckets_;
    s.bucket_of.assign(layers_.size(), -1);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (int l : buckets_[b].layers) s.bucket_of[std::size_t(l)] = int(b);
    s.open.resize(buckets_.size());
  }
}

ZeroTrainer::~ZeroTrainer() {
  // No prefetch may outlive the buffers it writes. Its error (a peer failed
  // while we were already unwinding) is not ours to report twice.
  for (auto& work : impl_->prefetching) {
    try {
      if (work) work->wait();
    } catch (const std::exception&) {
    }
  }
  try {
    if (impl_->gather_stream) {
      impl_->retire();
      impl_->gather_stream->synchronize();  // its waits too, before it is destroyed
    }
  } catch (const std::exception&) {
  }
}

float ZeroTrainer::step(const Batch& batch) {
  Impl& s = *impl_;
  s.missing.clear();
  for (const LayerBucket& b : buckets_) s.missing.push_back(int(b.layers.size()));
  float loss_value;
  {
    MemoryScope scope(MemoryCategory::Activations);
    Tensor loss = softmax_cross_entropy(s.forward(batch.x), batch.y);
    loss_value = loss.item();
    loss.backward();
  }
  s.retire();  // every gather of the step is done: the last released blocks go back
  for (std::size_t b = 0; b < s.open.size(); ++b)
    DPT_CHECK(!s.open[b].defined(), "bucket " << b << " was never reduce-scattered: a layer got no gradient");
  s.update(++t_);
  return loss_value;
}

std::vector<float> ZeroTrainer::full_parameters() {
  Impl& s = *impl_;
  std::vector<float> all(std::size_t(part_.padded));
  if (s.full_params()) {
    all = s.params.to_vector();
  } else {  // the library's all-gather of host copies: not a training step, and no Ψ floats on a capped device
    std::vector<float> mine = s.params.to_vector();
    s.ctx.comm.all_gather(mine.data(), all.data(), part_.shard);
  }
  all.resize(std::size_t(part_.psi));
  return all;
}

namespace {
// This rank's S floats of `t`: all of it when it is a shard, else its slice.
std::vector<float> own_shard(const Tensor& t, bool full, int rank, const Partition& part) {
  return full ? t.slice(rank * part.shard, part.shard).to_vector() : t.to_vector();
}
}  // namespace

std::vector<float> ZeroTrainer::shard_of_params() const {
  return own_shard(impl_->params, impl_->full_params(), impl_->ctx.rank, part_);
}

std::vector<float> ZeroTrainer::shard_of_moment(int which) const {
  const Impl& s = *impl_;
  return own_shard(which == 0 ? s.m : s.v, s.plan.stage == 0, s.ctx.rank, part_);
}

void ZeroTrainer::restore(const std::vector<float>& params, const std::vector<float>& m, const std::vector<float>& v,
                          int64_t t) {
  Impl& s = *impl_;
  const std::size_t S = std::size_t(part_.shard);
  DPT_CHECK(params.size() == S && m.size() == S && v.size() == S,
            "restore: expected " << S << " floats of parameters, m and v, got " << params.size() << ", " << m.size()
                                 << ", " << v.size());
  std::vector<int64_t> bounds = shard_bounds(part_, {0, part_.padded});
  auto put = [&](Tensor& into, const std::vector<float>& shard, bool full) {
    float* at = into.data() + (full ? s.ctx.rank * part_.shard : 0);  // device memory: copied into, never read here
    copy_floats(at, shard.data(), int64_t(shard.size()));
    if (full) ring_all_gather(s.ctx.comm, into.data(), bounds);
  };
  put(s.params, params, s.full_params());
  put(s.m, m, s.plan.stage == 0);
  put(s.v, v, s.plan.stage == 0);
  t_ = t;
}

// ----------------------------------------------------------------------------
// the loop

MemorySnapshot snapshot_memory(const Device& device) {
  MemorySnapshot m;
  for (int c = 0; c < kMemoryCategories; ++c) {
    auto category = static_cast<MemoryCategory>(c);
    m.current[std::size_t(c)] = double(device.ledger().current(category));
    m.peak[std::size_t(c)] = double(device.ledger().peak(category));
    m.at_peak[std::size_t(c)] = double(device.ledger().at_peak(category));
  }
  m.peak_total = double(device.ledger().peak_total());
  return m;
}

ZeroRun train_zero(Context& ctx, const Options& o, const Dataset& data, const std::vector<float>& initial,
                   const ZeroPlan& plan, const std::string& label, int64_t first_step,
                   const std::function<void(ZeroTrainer&)>& before, const AfterStep& after) {
  using Clock = std::chrono::steady_clock;
  ZeroRun run;
  ctx.device.reset_peak();
  ZeroTrainer trainer(ctx, o.widths(), initial, plan);
  if (before) before(trainer);
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);  // the same draw on every rank
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  ProgressBar bar(label, o.steps - first_step, ctx.is_root() && !o.quiet);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  auto start = Clock::now();
  for (int64_t step = first_step; step < o.steps; ++step) {
    auto step_start = Clock::now();
    ctx.comm.traffic().set_step(step);
    Batch batch;
    {
      MemoryScope scope(MemoryCategory::Activations);
      batch = gather_batch(data, strided_shard(sampler.indices(step), ctx.rank, ctx.world), ctx.device);
    }
    float loss = trainer.step(batch);
    run.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    ctx.comm.all_reduce(&loss, 1, ReduceOp::Avg);  // the library's: logged apart from the ring's bytes
    run.losses.push_back(loss);
    metrics.write(step, {{"loss", loss}, {"step_s", run.step_seconds.back()},
                         {"peak_bytes", double(ctx.device.ledger().peak_total())}});
    bar.update(step + 1 - first_step, "loss " + fixed(loss, 4));
    if (!std::isfinite(loss)) {  // the same value on every rank: all stop here
      run.diverged_step = step;
      break;
    }
    if (after) after(step + 1, trainer);
  }
  bar.finish();
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.memory = snapshot_memory(ctx.device);
  run.traffic = ctx.comm.gather_traffic();
  run.weights = trainer.full_parameters();
  return run;
}

}  // namespace dpt::ch07
