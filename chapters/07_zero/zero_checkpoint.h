/// @file zero_checkpoint.h
/// @brief Chapter 07's sharded checkpoints (provided, not a hole): each rank
/// saves its own shard of the parameters and of Adam's m and v, rank 0 seals
/// the set; a run resumes from it bit for bit (same parameters, moments, step
/// count, and — because the sampler draws batch `step` from the seed alone —
/// the same data order), on the same or another number of ranks; and a
/// checkpoint consolidates into one ordinary safetensors file of the weights.
/// The files, their checks and the N → M re-sharding are the core's
/// (dpt/sharded_checkpoint.h, docs/checkpoints.md).
///
///     ch07_zero --ranks 4 --steps 20 --save-checkpoint ck --checkpoint-every 10
///     ch07_zero --ranks 2 --batch 64 --steps 40 --resume ck        # 4×32 = 2×64: same global batch
///     ch07_zero --consolidate ck --save-weights final.safetensors
#pragma once

#include <cstdint>
#include <string>

#include "dpt/launch.h"
#include "dpt/options.h"
#include "zero_engine.h"
#include "zero_setup.h"

namespace dpt::ch07 {

/// Collective: every rank saves its shard of `trainer` under `dir` at the
/// trainer's step; after a barrier rank 0 writes the index and the completion
/// marker; a second barrier, so no rank reads or saves again before that.
void save_zero_checkpoint(Context& ctx, const std::string& dir, const ZeroTrainer& trainer, const Options& options,
                          const AdamConfig& adam);

/// A loaded shard, re-sharded for this run's world.
struct LoadedShard {
  int64_t step = 0;                          ///< steps already taken
  std::vector<float> params;      ///< this rank's S parameters
  std::vector<float> exp_avg;     ///< this rank's S floats of Adam's m
  std::vector<float> exp_avg_sq;  ///< this rank's S floats of Adam's v
};

/// This rank's shard of the checkpoint at `dir` for ctx.world ranks. Throws
/// dpt::Error when the checkpoint is broken (naming the file) or was written
/// by a different run: another model, seed, optimizer, lr, weight decay, data
/// or global batch (naming the setting and both values).
LoadedShard load_zero_checkpoint(Context& ctx, const std::string& dir, const Options& options, const AdamConfig& adam);

/// Collective: the run's --resume and --save-checkpoint in one: loads
/// f.resume (if set; a checkpoint at or past --steps is an error) and returns
/// the hooks that restore it before the first step and save every
/// f.checkpoint_every steps and after the last, and f.faults' planned crash
/// at the start of its step (zero_fault.h). `said`: a line for the
/// lecture ("Resuming at step 20 from ck."), or "".
ZeroCheckpoints zero_checkpoints(Context& ctx, const Options& options, const Ch07Flags& f, const AdamConfig& adam,
                                 std::string& said);

/// Writes the checkpoint at `dir` as one safetensors file of weights at `out`.
void consolidate_zero_checkpoint(const std::string& dir, const std::string& out);

}  // namespace dpt::ch07
