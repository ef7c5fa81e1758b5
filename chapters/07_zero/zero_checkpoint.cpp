// zero_checkpoint.cpp — ch07's trainer state to and from the core's sharded
// checkpoints, with the settings a bit-identical resume needs kept as meta.
#include "zero_checkpoint.h"

#include <map>
#include <memory>

#include "dpt/check.h"
#include "dpt/report.h"
#include "dpt/sharded_checkpoint.h"
#include "zero_fault.h"

namespace dpt::ch07 {

namespace {
// What must be equal for a resume to continue the same run.
std::map<std::string, std::string> run_settings(const Options& o, const AdamConfig& adam, int world) {
  return {{"model", o.model},         {"seed", std::to_string(o.seed)},
          {"optimizer", o.optimizer}, {"lr", fmt(o.lr, 9)},
          {"weight_decay", fmt(adam.weight_decay, 9)}, {"data", o.data},
          {"samples", std::to_string(o.samples)}, {"shuffle", o.no_shuffle ? "no" : "yes"},
          {"global_batch", std::to_string(o.batch * world)}};
}
}  // namespace

void save_zero_checkpoint(Context& ctx, const std::string& dir, const ZeroTrainer& trainer, const Options& o,
                          const AdamConfig& adam) {
  ShardState shard;
  shard.rank = ctx.rank, shard.world = ctx.world, shard.step = trainer.steps_taken();
  shard.psi = trainer.partition().psi;
  shard.params = trainer.shard_of_params();
  shard.exp_avg = trainer.shard_of_moment(0);
  shard.exp_avg_sq = trainer.shard_of_moment(1);
  std::vector<int64_t> w = o.widths();
  for (std::size_t l = 0; l + 1 < w.size(); ++l) {  // MLP::named_parameters()' names and shapes, flat order
    shard.layout.push_back({"fc" + std::to_string(l) + ".weight", Shape{w[l + 1], w[l]}});
    shard.layout.push_back({"fc" + std::to_string(l) + ".bias", Shape{w[l + 1]}});
  }
  shard.meta = run_settings(o, adam, ctx.world);
  save_checkpoint_shard(dir, shard);
  ctx.comm.barrier();  // every shard is on disk
  if (ctx.is_root()) finish_checkpoint(dir, shard);
  ctx.comm.barrier();  // sealed: nobody moves on before it is
}

LoadedShard load_zero_checkpoint(Context& ctx, const std::string& dir, const Options& o, const AdamConfig& adam) {
  ShardState shard = load_checkpoint_shard(dir, ctx.rank, ctx.world);
  for (const auto& [key, ours] : run_settings(o, adam, ctx.world)) {
    auto saved = shard.meta.find(key);
    DPT_CHECK(saved != shard.meta.end() && saved->second == ours,
              "checkpoint " << find_checkpoint(dir) << " was written with " << key << " "
                            << (saved == shard.meta.end() ? "(unrecorded)" : saved->second) << ", this run has " << key
                            << " " << ours << ": a resume must continue the same run");
  }
  DPT_CHECK(!shard.exp_avg.empty(), "checkpoint " << find_checkpoint(dir) << " holds no Adam moments");
  return {shard.step, shard.params, shard.exp_avg, shard.exp_avg_sq};
}

ZeroCheckpoints zero_checkpoints(Context& ctx, const Options& o, const Ch07Flags& f, const AdamConfig& adam,
                                 std::string& said) {
  ZeroCheckpoints hooks;
  said.clear();
  if (!f.resume.empty()) {
    auto loaded = std::make_shared<LoadedShard>(load_zero_checkpoint(ctx, f.resume, o, adam));
    DPT_CHECK(loaded->step < o.steps, "--resume: the checkpoint is at step " << loaded->step << " and --steps is "
                                                                            << o.steps << ": nothing left to train");
    hooks.first_step = loaded->step;
    hooks.before = [loaded](ZeroTrainer& t) {
      t.restore(loaded->params, loaded->exp_avg, loaded->exp_avg_sq, loaded->step);
    };
    said = "Resuming at step " + std::to_string(loaded->step) + " from " + f.resume + ".";
  }
  if (!f.save_checkpoint.empty()) {
    hooks.after = [&ctx, o, f, adam](int64_t done, ZeroTrainer& t) {
      if (done == o.steps || (f.checkpoint_every > 0 && done % f.checkpoint_every == 0))
        save_zero_checkpoint(ctx, f.save_checkpoint, t, o, adam);
    };
  }
  hooks.starting = planned_crash(ctx, f.faults);  // --fail: after the saves of the steps before it
  hooks.max_loss = f.max_loss, hooks.skipped_batches = f.skip_batches;
  return hooks;
}

void consolidate_zero_checkpoint(const std::string& dir, const std::string& out) { consolidate_checkpoint(dir, out); }

}  // namespace dpt::ch07
