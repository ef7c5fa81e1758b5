// data_parallel.cpp — the data-parallel loop, its single-device oracle, the
// verdicts chapters draw from a run (equivalence, ring traffic), and helpers.
#include "dpt/data_parallel.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <limits>

#include "dpt/check.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/step_check.h"
#include "dpt/timing.h"

namespace dpt {

namespace {
// max(a, b) where a NaN wins: a NaN is the largest difference there is.
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }
}  // namespace

void average_over_ranks(Communicator& comm, std::vector<Tensor>& tensors) {
  Device& device = tensors.empty() ? Device::host() : tensors.front().device();
  Tensor flat = flatten_on(tensors, device);  // (Σ numel,); every rank calls the all-reduce, even with none
  comm.all_reduce(flat.data(), flat.numel(), ReduceOp::Avg);
  unflatten(flat, tensors);
}

void average_gradients(Context& ctx, std::vector<Tensor>& grads) { average_over_ranks(ctx.comm, grads); }

std::vector<int64_t> strided_shard(const std::vector<int64_t>& global, int rank, int world) {
  DPT_CHECK(world >= 1 && rank >= 0 && rank < world, "strided_shard: rank " << rank << " of " << world);
  DPT_CHECK(global.size() % std::size_t(world) == 0, "a global batch of " << global.size()
                                                     << " samples does not divide among " << world << " ranks");
  std::vector<int64_t> mine;
  for (std::size_t i = std::size_t(rank); i < global.size(); i += std::size_t(world)) mine.push_back(global[i]);
  return mine;
}

double DataParallelRun::bytes_per_step() const {
  return losses.empty() ? 0 : double(traffic.total_bytes()) / double(losses.size());
}

// ----------------------------------------------------------------------------
// replicas

MLP make_replica_apart(Context& ctx, const Options& o) {
  Options own = o;
  own.load_weights.clear();                    // only the master reads the file
  own.seed = o.seed + 1 + uint64_t(ctx.rank);  // a start of its own: only a copy of the master makes them equal
  return build_model(own, ctx.device);
}

MLP make_replica(Context& ctx, const Options& o) {
  MLP replica = make_replica_apart(ctx, o);
  if (ctx.is_root()) {
    MLP master = build_model(o, Device::host());  // the CPU master copy
    copy_parameters(master, replica);
  }
  for (Tensor& p : replica.parameters()) ctx.comm.broadcast(p, 0);  // master → every replica
  broadcast_running_statistics(ctx.comm, nullptr, replica);         // rank 0's came with copy_parameters
  return replica;
}

void broadcast_running_statistics(Communicator& comm, const MLP* master, MLP& replica) {
  if (comm.rank() == 0 && master != nullptr) {
    DPT_CHECK(master->norms().size() == replica.norms().size(),
              "broadcast_running_statistics: the master has " << master->norms().size() << " batch norms, the replica "
                                                              << replica.norms().size());
    for (std::size_t i = 0; i < replica.norms().size(); ++i) {
      BatchNormRunning to = replica.norms()[i].running;  // handles: the copy lands in the replica's tensors
      to.mean.copy_from(master->norms()[i].running.mean);
      to.var.copy_from(master->norms()[i].running.var);
    }
  }
  for (const BatchNorm1d& norm : replica.norms()) {
    BatchNormRunning running = norm.running;
    comm.broadcast(running.mean, 0);
    comm.broadcast(running.var, 0);
  }
}

// ----------------------------------------------------------------------------
// the loop

namespace {
// Clears every rank's traffic log between two barriers (threads share one
// table: nobody may send while it is cleared).
void clear_traffic(Context& ctx) {
  ctx.comm.barrier();
  ctx.comm.traffic().clear();
  ctx.comm.barrier();
}

// What both loops keep around their steps: the progress bar, the metrics file,
// the global loss per step, the time.
class LoopBook {
 public:
  LoopBook(Context& ctx, const Options& o, const std::string& label)
      : ctx_(ctx), metrics_(ctx.is_root() ? o.metrics : ""), bar_(label, o.steps, ctx.is_root() && !o.quiet) {
    clear_traffic(ctx);
    start_ = std::chrono::steady_clock::now();
  }
  // After `step`, on every rank: the global loss is the mean of the shards'
  // losses (equal shard sizes). The step's seconds: "comm" from the trace
  // (this all-reduce included), compute from the trace too unless given.
  // False when the loss is not finite (the same value on every rank: all stop here).
  bool finish_step(int64_t step, float local_loss, double compute = -1) {
    float global_loss = local_loss;
    ctx_.comm.all_reduce(&global_loss, 1, ReduceOp::Avg);
    const double comm = ctx_.trace.seconds("comm");
    if (compute < 0) compute = ctx_.trace.seconds("compute");
    run_.losses.push_back(global_loss);
    run_.compute_seconds += compute;
    run_.sync_seconds += comm;
    metrics_.write(step, {{"loss", global_loss}, {"compute_s", compute}, {"comm_s", comm}});
    bar_.update(step + 1, "loss " + fixed(global_loss, 4));
    if (std::isfinite(global_loss)) return true;
    run_.diverged_step = step;
    return false;
  }
  DataParallelRun finish() {
    bar_.finish();
    run_.seconds = seconds_since(start_);
    run_.traffic = ctx_.comm.gather_traffic();  // every rank's sends (MPI: from every process)
    return std::move(run_);
  }

 private:
  Context& ctx_;
  MetricsWriter metrics_;
  ProgressBar bar_;
  DataParallelRun run_;
  std::chrono::steady_clock::time_point start_;
};
}  // namespace

DataParallelRun train_data_parallel(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                                    const GradientSync& sync, const std::string& label, const Sharder& shard,
                                    StepRecorder* recorder) {
  std::vector<Tensor> params = replica.parameters();
  auto optimizer = make_optimizer(o.optimizer, params, o.lr);
  // Same seed on every rank: every rank draws the same global batch.
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);
  LoopBook book(ctx, o, label);
  for (int64_t step = 0; step < o.steps; ++step) {
    ctx.comm.traffic().set_step(step);
    ctx.trace.reset_seconds();
    std::vector<Tensor> grads;
    Tensor loss;
    {
      auto span = ctx.trace.span("forward+backward", "compute");
      Batch batch = gather_batch(data, shard(sampler.indices(step), ctx.rank, ctx.world), ctx.device);
      optimizer->zero_grad();
      loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
      loss.backward();
      for (Tensor& p : params) grads.push_back(p.grad());
    }
    {
      auto span = ctx.trace.span("sync gradients", "comm");
      sync(ctx, grads);  // now the same mean on every rank
    }
    if (recorder) recorder->record(step, o.steps, params);  // outside the timed spans
    {
      auto span = ctx.trace.span("optimizer", "compute");
      optimizer->step();
    }
    if (!book.finish_step(step, loss.item())) break;
  }
  return book.finish();
}

DataParallelRun run_data_parallel(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                                  const DataParallelStep& step_fn, const std::string& label, StepRecorder* recorder) {
  std::vector<Tensor> params = replica.parameters();
  const int64_t count = replica.num_parameters();
  // Same seed on every rank: every rank draws the same global batch.
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);
  LoopBook book(ctx, o, label);
  for (int64_t step = 0; step < o.steps; ++step) {
    ctx.comm.traffic().set_step(step);
    std::vector<float> before;  // the weights the step starts from, when the recorder keeps this step
    const bool keep = recorder && recorder->keeps(step, o.steps, count);
    if (keep) before = flatten(params);
    ctx.trace.reset_seconds();
    float loss = 0;
    {
      auto span = ctx.trace.span("data-parallel step", "step");
      loss = step_fn(sampler.indices(step));
    }
    const double compute = ctx.trace.seconds("step") - ctx.trace.seconds("comm");  // the step's own
    if (keep) {
      std::vector<Tensor> grads;
      for (std::size_t i = 0; i < params.size(); ++i) {
        DPT_CHECK(params[i].grad().defined(), "step " << step << " left no gradient in parameter " << i
                                                      << ": a step must leave the gradient it applied in grad()");
        grads.push_back(params[i].grad());
      }
      recorder->record(step, o.steps, before.data(), flatten(grads).data(), count);
    }
    if (!book.finish_step(step, loss, compute)) break;
  }
  return book.finish();
}

// ----------------------------------------------------------------------------
// the checks

MLP train_single_device(const Options& o, const Dataset& data, int64_t global_batch) {
  return train_single_device(o, data, global_batch,
                             [&o](std::vector<Tensor> params) { return make_optimizer(o.optimizer, std::move(params), o.lr); });
}

MLP train_single_device(const Options& o, const Dataset& data, int64_t global_batch, const OptimizerFactory& make) {
  MLP model = build_model(o, Device::host());
  auto optimizer = make(model.parameters());
  BatchSampler sampler(data.size(), global_batch, !o.no_shuffle, o.seed);
  for (int64_t step = 0; step < o.steps; ++step) {
    Batch batch = gather_batch(data, sampler.indices(step), Device::host());
    optimizer->zero_grad();
    softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
    optimizer->step();
  }
  return model;
}

double max_weight_difference(const MLP& a, const MLP& b) {
  auto pa = a.parameters(), pb = b.parameters();
  DPT_CHECK(pa.size() == pb.size(), "comparing models with " << pa.size() << " and " << pb.size() << " parameters");
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i)
    worst = nan_max(worst, max_abs_diff(pa[i].to(Device::host()), pb[i].to(Device::host())));
  return worst;
}

void add_single_device_verdict(Verdicts& verdicts, double difference) {
  bool ok = std::isfinite(difference) && difference <= kSingleDeviceTolerance;
  verdicts.at_most("max |w - w_single-device|", difference, kSingleDeviceTolerance,
                   ok ? "float sums in another order drift ~1e-7 (bound argued in dpt/data_parallel.h)"
                      : "far above float rounding (~1e-7): the data-parallel run did not compute one device's steps");
}

namespace {
// What a traffic matrix shows when it is not a ring: every send that is not to the
// right neighbour, named (at most three).
std::string off_ring_sends(const std::vector<std::vector<int64_t>>& m) {
  const int n = int(m.size());
  std::string seen;
  int listed = 0, sending_pairs = 0, through_zero = 0;
  auto add = [&](const std::string& what) { seen += (seen.empty() ? "" : "; ") + what; };
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst) {
      if (m[src][dst] == 0) continue;
      ++sending_pairs;
      through_zero += (src == 0 || dst == 0) ? 1 : 0;
      if (dst == (src + 1) % n || listed++ >= 3) continue;
      add("rank " + std::to_string(src) + " sent " + format_bytes(double(m[src][dst])) + " to rank " +
          std::to_string(dst) + (dst == (src + n - 1) % n ? " (its left neighbour)" : " (not a neighbour)"));
    }
  for (int src = 0; src < n && n > 1; ++src)
    if (m[src][(src + 1) % n] == 0) add("rank " + std::to_string(src) + " sent nothing to its right neighbour");
  // Every message to or from rank 0 (on 3+ ranks a ring has a pair without it).
  if (!seen.empty() && n > 2 && through_zero == sending_pairs) seen = "everything went through rank 0: " + seen;
  return seen;
}
}  // namespace

void add_ring_traffic_verdicts(Verdicts& v, const TrafficLog& traffic, double bytes_per_call, int64_t calls,
                               const std::string& what) {
  const int n = traffic.world();
  std::string off = off_ring_sends(traffic.matrix());
  if (off.empty()) v.holds(what + ": each rank sends only to its right neighbour", true);
  else v.holds(what + ": the traffic is not a ring", false, off);
  double theory = 2.0 * (n - 1) / n * bytes_per_call * double(calls), worst = 0;
  for (int r = 0; r < n; ++r) worst = std::max(worst, std::fabs(double(traffic.bytes_sent(r)) - theory));
  v.at_most(what + ": bytes sent per rank vs 2(n-1)/n*S = " + format_bytes(theory) + ", worst |difference|", worst,
            8.0 * (n - 1) * double(calls), "chunks differ by at most one float: 2(n-1) sends of 4 bytes off per call");
}

double replica_spread(Context& ctx, const MLP& replica) {
  std::vector<float> mine = flatten(replica.parameters()), root = mine;
  ctx.comm.broadcast(root.data(), int64_t(root.size()), 0);
  return max_over_ranks(ctx.comm, max_abs_difference(mine, root));
}

double running_statistics_spread(Context& ctx, const MLP& replica) {
  std::vector<Tensor> buffers;
  for (const BatchNorm1d& norm : replica.norms()) buffers.push_back(norm.running.mean), buffers.push_back(norm.running.var);
  std::vector<float> mine = flatten(buffers), root = mine;
  ctx.comm.broadcast(root.data(), int64_t(root.size()), 0);
  return max_over_ranks(ctx.comm, max_abs_difference(mine, root));
}

// ----------------------------------------------------------------------------
// helpers

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  DPT_CHECK(a.size() == b.size(), "comparing " << a.size() << " with " << b.size() << " values");
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

void add_data_parallel_flags(CLI::App& app, bool& verify) {
  app.add_flag("--verify,!--no-verify", verify,
               "Replay chosen steps on one device with the global batch and compare gradients (default on)")
      ->capture_default_str();
}

}  // namespace dpt
