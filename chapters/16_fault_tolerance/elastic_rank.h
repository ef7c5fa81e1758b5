/// @file elastic_rank.h
/// @brief One rank's part of chapter 16's run (provided): step slots, each
/// asking the lighthouse for the quorum, healing who is behind, checking
/// checksums, and a step that commits on every member or on none.
#pragma once

#include <cstdint>

#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/options.h"
#include "lighthouse.h"
#include "run_record.h"

namespace dpt::ch16 {

/// How the run keeps going when the membership changes.
struct ElasticSettings {
  int world = 4;                 ///< ranks the run was started with
  bool keep_global_batch = true; ///< true: --batch × world samples per step on any quorum; false: --batch per member, lr scaled
  int64_t check_every = 4;       ///< checksum round every K slots (and after every quorum change)
  bool apply_before_vote = false;  ///< the broken transaction: apply the reduced gradient before the vote
  bool ring = false;             ///< the gradient all-reduce as a ring of sendrecv (a crash: in its last hop, unannounced)
};

/// Rank `rank`'s loop over o.steps step slots. A crash or freeze in `plan`
/// ends its part (until a join restarts it with a fresh state); every other
/// outcome is in `record`. Throws only on errors that are not a peer's failure.
void run_elastic_rank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
                      const ElasticSettings& s, Lighthouse& lighthouse, RunRecord& record);

/// The global sample at position `cursor` of the endless stream of epochs:
/// epoch cursor / N in a shuffled order of its own (seeded), position cursor % N.
int64_t sample_at(int64_t cursor, int64_t samples, uint64_t seed);

}  // namespace dpt::ch16
