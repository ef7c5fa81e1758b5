// zero_engine.cpp — chapter 07's trainer: the model states a stage keeps,
// buckets that fill as backward runs and go to the stage when complete, the
// update, and the loop.
//
// The flat buffers live on the rank's device, host memory (cpu:k) or a GPU
// (cuda:k): the host never reads them through a pointer; copies go through
// to_vector and copy_floats (dpt/floats.h).
#include "zero_engine.h"

#include <chrono>
#include <cmath>
#include <typeinfo>

#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/floats.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "dpt/report.h"
#include "sharded_ring.h"
#include "zero_fault.h"
#include "zero_layers.h"
#include "zero_report.h"

namespace dpt::ch07 {

// ----------------------------------------------------------------------------
// Adam on flat tensors: the core's own Adam step (dpt::Adam's arithmetic, kernels.h)

void adam_update(const AdamConfig& c, int64_t t, Tensor p, const Tensor& g, Tensor m, Tensor v) {
  DPT_CHECK(p.numel() == g.numel() && p.numel() == m.numel() && p.numel() == v.numel(),
            "adam_update: parameters (" << p.numel() << " floats), gradients (" << g.numel() << "), m (" << m.numel()
                                        << ") and v (" << v.numel()
                                        << ") must be equally long: each parameter steps with its own gradient "
                                           "and its own moments, and m and v exist only for what this rank keeps");
  if (p.numel() == 0) return;
  AdamStep step = AdamStep{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.decoupled}.at_step(t);
  kernels_for(p.device()).adam_step(p.data(), m.data(), v.data(), g.data(), step, p.numel());
}

namespace {
Tensor zeros_as(MemoryCategory category, int64_t n, Device& device) {
  MemoryScope scope(category);
  return Tensor::zeros({n}, device);
}

// shard_bounds is a hole whose result the stage holes consume: a wrong one is
// named here, before training, rather than as a fault of what consumed it.
// The oracle counts element by element which shard each element lies in.
void check_shard_bounds(const Partition& part, Range range, const std::string& what) {
  std::vector<int64_t> want(std::size_t(part.world) + 1, 0);
  for (int64_t x = range.begin; x < range.end; ++x) ++want[std::size_t(x / part.shard) + 1];
  for (std::size_t r = 1; r < want.size(); ++r) want[r] += want[r - 1];
  std::vector<int64_t> got = shard_bounds(part, range);
  if (got == want) return;
  std::string text = "{", broken;  // the bounds returned; the first property they break
  for (std::size_t i = 0; i < got.size() && i < 9; ++i) text += (i ? ", " : "") + std::to_string(got[i]);
  text += got.size() > 9 ? ", …}" : "}";
  if (got.size() != want.size()) broken = "N+1 bounds, rank r owning [b[r], b[r+1])";
  else if (got.front() != 0) broken = "b[0] = 0: the bounds are offsets relative to range.begin";
  else if (got.back() != range.size()) broken = "b[N] = the range's size, each element owned by one rank";
  else broken = "rank r owns exactly the range's elements that lie in its shard [r·S, (r+1)·S), in rank order";
  DPT_FAIL("shard_bounds (exercises/07_zero/partition.cpp) returned " << text << " for " << what << " ["
           << range.begin << ", " << range.end << ") with N = " << part.world << ", S = " << part.shard
           << "; broken: " << broken << " (its test in tests/test_ch07.cpp says more)");
}

// A plain dpt::Error raised inside a stage hole (a slice out of range, a
// count mismatch) names the hole; NotImplemented, timeouts, failed peers and
// out-of-memory pass as they are (the harness reads their type).
template <class Call>
void in_hole(const char* hole, int stage, Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    if (typeid(e) != typeid(Error)) throw;
    throw Error(std::string(e.what()) + " — raised inside " + hole + " (exercises/07_zero/stages.cpp) at stage " +
                    std::to_string(stage) + "; ch07.h's ZeroState table says which tensors are full (N·S floats) " +
                    "and which this rank's shard (S) at each stage",
                e.where());
  }
}

// Layers in reverse order (backward finishes the last first), closed when the
// next layer would push the bucket past the cap; a layer larger than the cap
// sits alone.
std::vector<LayerBucket> bucket_layers(const std::vector<Range>& layers, int64_t cap_bytes) {
  std::vector<LayerBucket> buckets;
  for (int l = int(layers.size()) - 1; l >= 0; --l) {
    const Range& r = layers[std::size_t(l)];
    if (buckets.empty() || 4 * (buckets.back().range.size() + r.size()) > cap_bytes) buckets.push_back({r, {}});
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
  ZeroState state;
  std::vector<LayerBucket> buckets;
  std::vector<int> bucket_of;  // layer → its bucket
  std::vector<Tensor> open;    // stages 2, 3: bucket → its gradient buffer from its first layer on
  std::vector<int> missing;    // bucket → layers whose gradient has not arrived this step
  std::unique_ptr<ZeroLayers> layers;

  Impl(Context& c, const ZeroPlan& p) : ctx(c), plan(p), state{c.comm, c.device} { state.stage = p.stage; }
  bool full_params() const { return plan.stage <= 2; }
  bool full_grads() const { return plan.stage <= 1; }

  // Where layer l's gradient goes: its place in the flat gradient buffer
  // (stages 0, 1), or in its bucket's own buffer (stages 2, 3: there is no
  // full gradient buffer).
  Tensor grad_destination(int l) {
    const Range& r = state.layers[std::size_t(l)];
    if (full_grads()) return state.grads.slice(r.begin, r.size());
    const int b = bucket_of[std::size_t(l)];
    const Range& br = buckets[std::size_t(b)].range;
    if (!open[std::size_t(b)].defined()) open[std::size_t(b)] = zeros_as(MemoryCategory::Comm, br.size(), ctx.device);
    return open[std::size_t(b)].slice(r.begin - br.begin, r.size());
  }
  // Layer l's gradient is final; the last of its bucket hands the bucket over.
  void gradient_ready(int l) {
    const int b = bucket_of[std::size_t(l)];
    if (--missing[std::size_t(b)] > 0) return;
    const Range& range = buckets[std::size_t(b)].range;
    auto span = ctx.trace.span("bucket " + std::to_string(b) + " ready", "comm");
    in_hole("on_bucket_ready", plan.stage, [&] {
      if (full_grads()) {
        Tensor view = state.grads.slice(range.begin, range.size());
        on_bucket_ready(state, range, view);
      } else {
        on_bucket_ready(state, range, open[std::size_t(b)]);
      }
    });
  }

  // The recorder reads host memory: on a GPU it gets copies of the Ψ floats,
  // made only for a step it keeps (rank 0's recorder keeps a few steps).
  void record(int64_t step, int64_t steps) {
    const int64_t psi = state.part.psi;
    if (!plan.recorder->keeps(step, steps, psi)) return;
    std::vector<float> p = state.params.slice(0, psi).to_vector(), g = state.grads.slice(0, psi).to_vector();
    plan.recorder->record(step, steps, p.data(), g.data(), psi);
  }
};

// ----------------------------------------------------------------------------
// the trainer

ZeroTrainer::ZeroTrainer(Context& ctx, const std::vector<int64_t>& widths, const std::vector<float>& initial,
                         const ZeroPlan& plan)
    : impl_(std::make_unique<Impl>(ctx, plan)) {
  DPT_CHECK(plan.stage >= 0 && plan.stage <= 3, "--stage must be 0, 1, 2 or 3, got " << plan.stage);
  Impl& s = *impl_;
  int64_t offset = 0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    int64_t n = widths[l] * widths[l + 1] + widths[l + 1];  // weight (out, in), then bias (out)
    layers_.push_back({offset, offset + n});
    offset += n;
  }
  DPT_CHECK(int64_t(initial.size()) == offset,
            "ZeRO: " << initial.size() << " initial parameters for a model of " << offset);
  part_ = partition_parameters(offset, ctx.world);
  ZeroState& z = s.state;
  z.part = part_, z.layers = layers_, z.adam = plan.adam;
  z.gathered.resize(layers_.size());
  const int64_t S = part_.shard, P = part_.padded, mine = ctx.rank * S;
  std::vector<float> padded(initial);
  padded.resize(std::size_t(P), 0.0f);  // the padding: zeros at the end, trained like the rest (stays 0)
  {
    MemoryScope scope(MemoryCategory::Params);
    z.params = s.full_params() ? Tensor::from_vector({P}, padded, ctx.device)
                               : Tensor::from_vector({S}, std::vector<float>(padded.begin() + mine, padded.begin() + mine + S),
                                                     ctx.device);
  }
  z.grads = zeros_as(MemoryCategory::Grads, s.full_grads() ? P : S, ctx.device);
  z.m = zeros_as(MemoryCategory::OptimizerState, plan.stage == 0 ? P : S, ctx.device);
  z.v = zeros_as(MemoryCategory::OptimizerState, plan.stage == 0 ? P : S, ctx.device);
  for (std::size_t l = 0; l < layers_.size(); ++l) check_shard_bounds(part_, layers_[l], "layer " + std::to_string(l));
  buckets_ = bucket_layers(layers_, plan.bucket_bytes);
  for (std::size_t b = 0; b < buckets_.size(); ++b) check_shard_bounds(part_, buckets_[b].range, "bucket " + std::to_string(b));
  s.buckets = buckets_;
  s.bucket_of.assign(layers_.size(), -1);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (int l : buckets_[b].layers) s.bucket_of[std::size_t(l)] = int(b);
  s.open.resize(buckets_.size());
  s.layers = std::make_unique<ZeroLayers>(
      ctx, z, widths, plan.prefetch, [&s](int l) { return s.grad_destination(l); },
      [&s](int l) { s.gradient_ready(l); });
}

ZeroTrainer::~ZeroTrainer() = default;

float ZeroTrainer::step(const Batch& batch, int64_t steps) {
  Impl& s = *impl_;
  s.missing.clear();
  for (const LayerBucket& b : buckets_) s.missing.push_back(int(b.layers.size()));
  float loss_value;
  {
    MemoryScope scope(MemoryCategory::Activations);
    Tensor loss = softmax_cross_entropy(s.layers->forward(batch.x), batch.y);
    loss_value = loss.item();
    loss.backward();
  }
  s.layers->finish_step();
  for (std::size_t b = 0; b < s.missing.size(); ++b)
    DPT_CHECK(s.missing[b] == 0, "bucket " << b << " was never complete: a layer got no gradient");
  ++t_;
  if (s.plan.stage == 0 && s.plan.recorder) s.record(t_ - 1, steps);  // the averaged gradient, before Adam
  auto span = s.ctx.trace.span("update", "compute");
  in_hole("update_parameters", s.plan.stage, [&] { update_parameters(s.state, t_); });
  return loss_value;
}

std::vector<float> ZeroTrainer::full_parameters() {
  Impl& s = *impl_;
  std::vector<float> all(std::size_t(part_.padded));
  if (s.full_params()) {
    all = s.state.params.to_vector();
  } else {  // the library's all-gather of host copies: not a training step, and no Ψ floats on a capped device
    std::vector<float> mine = s.state.params.to_vector();
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
  return own_shard(impl_->state.params, impl_->full_params(), impl_->ctx.rank, part_);
}

std::vector<float> ZeroTrainer::shard_of_moment(int which) const {
  const Impl& s = *impl_;
  return own_shard(which == 0 ? s.state.m : s.state.v, s.plan.stage == 0, s.ctx.rank, part_);
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
  put(s.state.params, params, s.full_params());
  put(s.state.m, m, s.plan.stage == 0);
  put(s.state.v, v, s.plan.stage == 0);
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

namespace {
ZeroRun train(Context& ctx, const Options& o, const Dataset& data, const std::vector<float>& initial,
              const ZeroPlan& plan, const std::string& label, const ZeroCheckpoints& checkpoints) {
  using Clock = std::chrono::steady_clock;
  const int64_t first_step = checkpoints.first_step;
  ZeroRun run;
  ctx.device.reset_peak();
  ZeroTrainer trainer(ctx, o.widths(), initial, plan);
  if (checkpoints.before) checkpoints.before(trainer);
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);  // the same draw on every rank
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  ProgressBar bar(label, o.steps - first_step, ctx.is_root() && !o.quiet);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  auto start = Clock::now();
  for (int64_t step = first_step; step < o.steps; ++step) {
    if (checkpoints.starting) checkpoints.starting(step);
    auto step_start = Clock::now();
    ctx.comm.traffic().set_step(step);
    const int64_t drawn = checkpoints.skipped_batches.empty() ? step : batch_of_step(step, checkpoints.skipped_batches);
    Batch batch;
    {
      MemoryScope scope(MemoryCategory::Activations);
      batch = gather_batch(data, strided_shard(sampler.indices(drawn), ctx.rank, ctx.world), ctx.device);
    }
    float loss = trainer.step(batch, o.steps);
    run.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    ctx.comm.all_reduce(&loss, 1, ReduceOp::Avg);  // the library's: logged apart from the ring's bytes
    run.losses.push_back(loss);
    metrics.write(step, {{"loss", loss}, {"step_s", run.step_seconds.back()},
                         {"peak_bytes", double(ctx.device.ledger().peak_total())}});
    bar.update(step + 1 - first_step, "loss " + fixed(loss, 4));
    if (!std::isfinite(loss) || (checkpoints.max_loss > 0 && loss > checkpoints.max_loss)) {  // the same value on
      run.diverged_step = step, run.diverged_batch = drawn;  // every rank: all stop here, before any save of it
      break;
    }
    if (checkpoints.after) checkpoints.after(step + 1, trainer);
  }
  bar.finish();
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.memory = snapshot_memory(ctx.device);
  run.layers = trainer.layer_ranges(), run.buckets = trainer.buckets();
  run.traffic = ctx.comm.gather_traffic();
  run.weights = trainer.full_parameters();
  return run;
}
}  // namespace

ZeroRun train_zero(Context& ctx, const Options& o, const Dataset& data, const std::vector<float>& initial,
                   const ZeroPlan& plan, const std::string& label, const ZeroCheckpoints& checkpoints) {
  try {
    return train(ctx, o, data, initial, plan, label, checkpoints);
  } catch (const OutOfMemory& e) {  // name the stage that would fit
    Partition part = partition_parameters(int64_t(initial.size()), ctx.world);
    throw OutOfMemory(std::string(e.what()) + " at stage " + std::to_string(plan.stage) + ". " +
                      which_stage_fits(part, plan.stage, double(ctx.device.capacity())));
  }
}

}  // namespace dpt::ch07
