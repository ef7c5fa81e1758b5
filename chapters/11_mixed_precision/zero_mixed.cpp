// zero_mixed.cpp — mixed precision under ZeRO stages 0–3, measured by the
// ledger and set next to the formula (zero_mixed.h).
#include "zero_mixed.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "ch11.h"
#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/flatten.h"
#include "dpt/launch.h"
#include "dpt/memory_ledger.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "recompute.h"

namespace dpt::ch11 {

namespace {

// A (S,) tensor in the current memory category: this rank's values [first, first + S) of `flat`
// (Ψ values of the flat buffer; past Ψ, the padding, zeros).
Tensor shard_of(const Tensor& flat, int64_t first, int64_t S, Device& device) {
  Tensor part = Tensor::zeros({S}, device);
  const int64_t valid = std::max<int64_t>(0, std::min(S, flat.numel() - first));
  if (valid > 0) part.slice(0, valid).copy_from(flat.slice(first, valid));
  return part;
}

struct RankResult {
  StateBytes measured;
  double comm_peak = 0;
  int64_t psi = 0, shard = 0, taken = 0;
};

RankResult train_rank(Context& ctx, const Options& o, const Dataset& data, const Setting& setting, int stage) {
  Device& device = ctx.device;
  const Precision p = setting.precision;
  const int n = ctx.world;
  const MemoryLedger& ledger = device.ledger();
  auto now = [&](MemoryCategory c) { return double(ledger.current(c)); };
  const StateBytes before{now(MemoryCategory::Params), now(MemoryCategory::Grads), now(MemoryCategory::OptimizerState)};
  const double comm_before = now(MemoryCategory::Comm);
  device.reset_peak();

  // The model forward reads: kept for good (stages 0–2: the 16-bit weights), or built for one step (stage 3).
  std::optional<MLP> model;
  auto build = [&] {
    MemoryScope scope(stage == 3 ? MemoryCategory::Comm : MemoryCategory::Params);
    model.emplace(build_model(o, device));
  };
  build();
  std::vector<Tensor> params = model->parameters();
  for (Tensor& w : params) round_(w, p);
  const int64_t psi = model->num_parameters(), S = (psi + n - 1) / n, first = ctx.rank * S;
  Tensor flat;
  {
    MemoryScope scope(MemoryCategory::Comm);
    flat = flatten_on(params, device);  // (Ψ,), for this rank's shard of the initial weights
  }
  Tensor shard_w;                // stage 3: this rank's S 16-bit weights
  std::vector<Tensor> masters;   // fp32: a copy of every weight (stage 0) or of this rank's shard
  {
    MemoryScope scope(MemoryCategory::Params);
    if (stage == 3) shard_w = shard_of(flat, first, S, device).set_requires_grad(true);
  }
  {
    MemoryScope scope(MemoryCategory::OptimizerState);
    if (stage == 0)
      for (const Tensor& w : params) masters.push_back(w.clone().set_requires_grad(true));
    else
      masters.push_back(shard_of(flat, first, S, device).set_requires_grad(true));
  }
  flat = Tensor();
  if (stage == 3) model.reset(), params.clear();
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o.optimizer, masters, o.lr);
  Tensor grad_shard;  // stages 2–3: this rank's S 16-bit gradients of the mean
  {
    MemoryScope scope(MemoryCategory::Grads);
    if (stage >= 2) grad_shard = Tensor::zeros({S}, device);
  }
  LossScaler scaler = setting.scaler;
  BatchSampler sampler(data.size(), o.batch * n, !o.no_shuffle, o.seed);
  RankResult result;
  for (int64_t step = 0; step < 30 && result.taken < 2; ++step) {
    MemoryScope transient(MemoryCategory::Comm);  // what a step allocates besides the categories below
    if (stage == 3) {                             // gather the weights for this step
      Tensor full = Tensor::zeros({n * S}, device);
      ctx.comm.all_gather(shard_w, full);
      build();
      params = model->parameters();
      unflatten(full.slice(0, psi), params);
    }
    Batch batch = gather_batch(data, strided_shard(sampler.indices(step), ctx.rank, n), device);
    for (Tensor& w : params) w.zero_grad();
    forward_backward(*model, batch, p, scaler.scale, Recompute::None, nullptr);  // gradients: Grads
    float overflowed = 0;
    for (Tensor& w : params) {
      round_(w.grad(), p);
      overflowed = std::max(overflowed, has_inf_or_nan(w.grad()) ? 1.0f : 0.0f);
    }
    ctx.comm.all_reduce(&overflowed, 1, ReduceOp::Max);  // one rank's inf skips the step everywhere
    bool stepped = false;
    if (overflowed == 0) {
      // The mean gradient, summed in fp32 and stored in 16 bits: |mean| <= the largest finite 16-bit value.
      Tensor sum = Tensor::zeros({n * S}, device);
      std::vector<Tensor> grads;
      for (Tensor& w : params) grads.push_back(w.grad());
      Tensor head = sum.slice(0, psi);
      flatten_into(grads, head);
      Tensor mine;  // the gradient this rank's master_step reads
      if (stage <= 1) {
        ctx.comm.all_reduce(sum, ReduceOp::Sum);
        scale_(sum, 1.0f / float(n));
        round_(sum, p);
        unflatten(sum.slice(0, psi), grads);  // every rank keeps every gradient
        mine = stage == 0 ? Tensor() : sum.slice(first, S);
      } else {
        ctx.comm.reduce_scatter(sum, grad_shard, ReduceOp::Sum);
        scale_(grad_shard, 1.0f / float(n));
        round_(grad_shard, p);
        for (Tensor& w : params) w.zero_grad();  // the full gradients go
        mine = grad_shard;
      }
      if (stage == 0) {
        MemoryScope scope(MemoryCategory::OptimizerState);
        stepped = master_step(params, masters, *optimizer, scaler.scale, p);
      } else {
        std::vector<Tensor> part{stage == 3 ? shard_w : shard_of(flatten_on(params, device), first, S, device)};
        part[0].set_requires_grad(true).set_grad(mine.clone());
        {
          MemoryScope scope(MemoryCategory::OptimizerState);
          stepped = master_step(part, masters, *optimizer, scaler.scale, p);
        }
        part[0].zero_grad();
        if (stage <= 2) {  // every rank's updated shard, into every rank's weights
          Tensor full = Tensor::zeros({n * S}, device);
          ctx.comm.all_gather(part[0], full);
          unflatten(full.slice(0, psi), params);
        }
      }
      for (Tensor& m : masters) m.zero_grad();  // nothing master_step left in grad() carries into the next step
      DPT_CHECK(stepped, "rank " << ctx.rank << ": master_step skipped a step whose mean gradient is finite");
      result.taken += 1;
    } else if (stage >= 2) {
      for (Tensor& w : params) w.zero_grad();
    }
    update_loss_scale(scaler, !stepped);
    if (stage == 3) model.reset(), params.clear();  // the gathered weights go
  }
  const double width = bytes_per_value(p);
  result.measured = {(now(MemoryCategory::Params) - before.params) / 4 * width,
                     (now(MemoryCategory::Grads) - before.grads) / 4 * width,
                     now(MemoryCategory::OptimizerState) - before.state};
  result.comm_peak = double(ledger.peak(MemoryCategory::Comm)) - comm_before;
  result.psi = psi, result.shard = S;
  return result;
}

}  // namespace

ZeroMixedRun train_zero_mixed(const Options& o, const Dataset& data, const Setting& setting, int stage, int world,
                              const std::string& device) {
  DPT_CHECK(setting.precision != Precision::FP32, "ZeRO with fp32 weights is chapter 07's: give --precision bf16 or fp16");
  LaunchOptions launch_options;
  launch_options.ranks = world;
  launch_options.device = device;
  launch_options.private_world = true;  // thread ranks of their own, whoever started this process
  ZeroMixedRun run;
  run.stage = stage, run.world = world;
  run.measured.resize(std::size_t(world)), run.comm_peak.resize(std::size_t(world));
  launch(launch_options, [&](Context& ctx) {
    RankResult r = train_rank(ctx, o, data, setting, stage);
    run.measured[std::size_t(ctx.rank)] = r.measured, run.comm_peak[std::size_t(ctx.rank)] = r.comm_peak;
    if (ctx.is_root()) run.psi = r.psi, run.shard = r.shard, run.steps_taken = r.taken;
  });
  return run;
}

void report_zero_memory(const std::vector<ZeroMixedRun>& runs, const StateBytes& width, Precision p,
                        const Narrator& say, Verdicts& v) {
  if (runs.empty()) return;
  const ZeroMixedRun& any = runs.front();
  const std::string f = precision_name(p);
  Table table("model states per rank, " + f + " + fp32 master (" + zero_formula_text(0, width) + " in all): Ψ = " +
                  std::to_string(any.psi) + ", N = " + std::to_string(any.world) + ", S = " + std::to_string(any.shard),
              {"stage", "formula", "bytes", "+ padding", "= predicted", "measured, rank 0", "worst rank off by",
               "step buffers (peak)"});
  for (const ZeroMixedRun& run : runs) {
    const double psi = double(run.psi), S = double(run.shard);
    const StateBytes formula = zero_state_bytes(run.stage, width, psi, psi / run.world);
    const StateBytes predicted = zero_state_bytes(run.stage, width, psi, S);  // a divided category holds S values
    StateBytes off;
    for (const StateBytes& m : run.measured)
      off = {std::max(off.params, std::fabs(m.params - predicted.params)),
             std::max(off.grads, std::fabs(m.grads - predicted.grads)),
             std::max(off.state, std::fabs(m.state - predicted.state))};
    const StateBytes& m0 = run.measured.front();
    table.add_row({std::to_string(run.stage), zero_formula_text(run.stage, width), format_bytes(formula.total()),
                   format_bytes(predicted.total() - formula.total()), format_bytes(predicted.total()),
                   format_bytes(m0.params) + " + " + format_bytes(m0.grads) + " + " + format_bytes(m0.state),
                   fmt(off.params + off.grads + off.state) + " B",
                   format_bytes(*std::max_element(run.comm_peak.begin(), run.comm_peak.end()))});
    const std::string at = "stage " + std::to_string(run.stage) + ", N = " + std::to_string(run.world) + ": ";
    if (run.steps_taken == 0) {  // the optimizer allocates its moments at its first step
      v.holds(at + "the optimizer stepped, so its state can be counted", false,
              "every step of 30 overflowed: lower the loss scale");
      continue;
    }
    auto term = [&](double w, bool divided) { return fmt(w) + "Ψ" + (divided ? "/N + padding" : ""); };
    v.at_most(at + f + " weights per rank = " + term(width.params, run.stage >= 3) + " (bytes off, worst rank)",
              off.params, 0, "the ledger's parameters at 2 bytes a value");
    v.at_most(at + f + " gradients per rank = " + term(width.grads, run.stage >= 2) + " (bytes off, worst rank)",
              off.grads, 0, "the ledger's gradients at 2 bytes a value");
    v.at_most(at + "optimizer state (fp32 master + moments) per rank = " + term(width.state, run.stage >= 1) +
                  " (bytes off, worst rank)",
              off.state, 0, "the master copy and every moment in fp32, 4 bytes a value");
  }
  if (any.world == 1)  // every stage holds Ψ values of each category: a stage that divides nothing passes too
    v.cannot_fail("stages 1-3 divide their categories among the N ranks (Ψ/N each)", on_one_rank(4));
  if (say.enabled()) table.print(std::cout);
  say.say("predicted = the formula on Ψ/N plus the padding: a divided category holds S = ⌈Ψ/N⌉ values.\n"
          "Measured between steps, by the device ledger of each rank. Step buffers: what a step gathers or sums\n"
          "into (gathered weights, the full gradient before its reduce-scatter), gone by the end of the step.");
}

}  // namespace dpt::ch11
