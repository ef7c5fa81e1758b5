/// @file restart_checkpoint.h
/// @brief What a launch of chapter 16 under mpirun seals for the next one
/// (provided): the replica and its momentum, where the run stands (slot,
/// committed steps, data cursor), the quorum that sealed it, and the run's
/// record so far (the ledger, the checksum rounds), so that the final launch
/// judges the whole run across every restart.
///
///     DIR/step-SSSSSSSS/shard-RRRRR-of-NNNNN.safetensors   rank r's cut of [parameters | momentum], 2Ψ floats
///                      /ledger.safetensors   the record: committed steps' samples, quorum ids, lr; rollbacks
///                      /index.json           world, step = slot, meta: cursor, quorum, batch, the ledger's CRC-32
///                      /COMPLETE             written last (dpt/sharded_checkpoint.h seals the directory)
///
/// The shards, the seal and the N → M load are the core's
/// (dpt/sharded_checkpoint.h); the ledger is written into the step's
/// `.partial` directory before the seal, and its CRC-32 is in index.json, so
/// COMPLETE vouches for it too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch16.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "run_record.h"

namespace dpt::ch16 {

/// Everything a launch hands on to the next.
struct RestartState {
  std::vector<float> params;    ///< (Ψ,) the replica, flat
  std::vector<float> momentum;  ///< (Ψ,) its momentum buffers
  int64_t slot = 0;             ///< step slots done: the next launch starts at this one
  int64_t committed = 0;        ///< committed steps (fewer than `slot` after a rollback)
  int64_t cursor = 0;           ///< the data cursor (assign_samples' next_cursor)
  QuorumDecision quorum;        ///< the quorum of the launch that sealed it (members, id)
  int first_world = 0;          ///< ranks of the run's first launch: --keep's N0
  std::vector<LedgerEntry> ledger;         ///< every committed step so far
  std::vector<MismatchEntry> mismatches;   ///< every checksum round that disagreed so far
  int64_t checks = 0;           ///< checksum rounds that agreed so far
};

/// Collective over ctx's world: seals `st` under `dir` at step `st.slot`
/// (each rank its shard, rank 0 the ledger and the seal), with the flags a
/// resumed run must share (`o`'s seed, model, data, batch, lr and `keep`).
void save_restart_checkpoint(Context& ctx, const std::string& dir, const RestartState& st, const Options& o,
                             const std::string& keep);

/// The sealed checkpoint at `dir` (DIR, following DIR/latest, or DIR/step-S),
/// whole (any rank may call it; every rank reads the same). Throws dpt::Error
/// naming the file when it is broken, or the flag and both values when it was
/// written by a run with other flags.
RestartState load_restart_checkpoint(const std::string& dir, const Options& o, const std::string& keep);

}  // namespace dpt::ch16
