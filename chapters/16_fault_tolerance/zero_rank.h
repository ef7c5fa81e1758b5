/// @file zero_rank.h
/// @brief Chapter 16 under ZeRO-1 (`--zero`, provided): each member of the
/// quorum holds 1/n of the momentum (chapter 07's cut: Ψ floats zero-padded to
/// n·S, S = ceil(Ψ/n), member i owns [i·S, (i+1)·S)), so a crash loses a shard
/// no survivor holds. Two ways back, chosen by `--shard-recovery`:
///
///  - checkpoint: every K committed steps the quorum seals a sharded checkpoint
///    (dpt/sharded_checkpoint.h). After a crash the survivors load the last one
///    re-sharded N → M, parameters and momentum, and go back to its step: the
///    steps since are lost and recomputed (their ledger entries undone).
///  - buddy: every step each member sends its new momentum shard to its left
///    neighbour, before the vote; so member i also holds member i+1's shard.
///    After a crash the survivors re-partition the momentum from their own
///    shards and the buddies of the dead: nothing is lost.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/options.h"
#include "lighthouse.h"
#include "run_record.h"

namespace dpt::ch16 {

/// How the --zero run recovers a lost shard.
struct ZeroSettings {
  int world = 4;                 ///< ranks the run was started with
  bool buddy = false;            ///< true: buddy copies; false: sharded checkpoints
  int64_t checkpoint_every = 5;  ///< checkpoint: seal one every K committed steps (and at step 0)
  std::string dir;               ///< checkpoint: where the run writes them (a scratch directory)
  std::string mistake = "none";  ///< --shard-mistake: none, stale-buddy, off-by-one
};

/// One recovery after the membership shrank.
struct ZeroRecovery {
  int64_t slot = 0;              ///< the slot whose quorum recovered
  int from = 0;                  ///< members before
  int to = 0;                    ///< members after
  int64_t committed_before = 0;  ///< committed steps the survivors held
  int64_t restored = 0;          ///< committed steps after the recovery
  double seconds = 0;            ///< the recovery itself, measured on the quorum's first member
};

/// What the ranks of a --zero run leave for the verdicts (under `mutex`).
struct ZeroRecord {
  std::mutex mutex;                          ///< guards every field
  std::vector<LedgerEntry> ledger;           ///< committed steps (a checkpoint recovery undoes the lost ones)
  std::vector<std::string> dropped;          ///< slots dropped by a crash
  std::vector<ZeroRecovery> recoveries;      ///< every shrink
  std::vector<std::vector<float>> finals;    ///< by world rank: parameters at the end (empty: gone)
  std::vector<std::vector<float>> shards;    ///< by world rank: its momentum shard at the end
  std::vector<int> index;                    ///< by world rank: its index in the last quorum
  std::vector<int64_t> buddy_bytes;          ///< by world rank: bytes its buddy copy holds at the end
  std::vector<int64_t> buddy_sent;           ///< by world rank: bytes its last step's refresh sent (traffic log)
  int64_t checkpoints = 0;                   ///< checkpoints sealed
  double upkeep_seconds = 0;                 ///< the quorum's first member's time keeping the copies (saves, refreshes)
  double step_seconds = 0;                   ///< committed steps' time on the quorum's first member
  int64_t steps_timed = 0;                   ///< how many steps step_seconds sums
};

/// Rank `rank`'s loop over o.steps slots of the --zero run (crashes only).
void run_zero_rank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
                   const ZeroSettings& s, Lighthouse& lighthouse, ZeroRecord& record);

/// Member `index` of `n`'s shard of the flat vector `flat` (Ψ = flat.size()):
/// floats [index·S + offset, (index+1)·S + offset), S = ceil(Ψ/n), zero past Ψ.
/// `offset` is 0 but for the planted off-by-one.
std::vector<float> zero_shard_of(const std::vector<float>& flat, int index, int n, int64_t offset = 0);

/// The inverse: a Ψ-float vector holding `shard` at member `index` of `n`'s
/// place and zero elsewhere (a sum of every member's is the whole vector).
std::vector<float> zero_place_shard(const std::vector<float>& shard, int64_t psi, int index, int n);

}  // namespace dpt::ch16
