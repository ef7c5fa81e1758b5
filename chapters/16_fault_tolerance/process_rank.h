/// @file process_rank.h
/// @brief One process of a launch of chapter 16 under mpirun (provided): the
/// launch's quorum, then step slots on the MPI communicator, each a
/// transaction through commit_step, with the checksum round, the planned
/// faults for real, and sealed checkpoints.
///
/// A launch is one quorum: the processes mpirun started. What a slot does is
/// what it does under threads (elastic_rank.cpp) minus what needs a peer to
/// live on after a failure: a crash SIGKILLs the process and a freeze stops
/// it answering, and either ends the launch (Open MPI has no ULFM); the
/// survivors go on in the next launch, from the last sealed checkpoint
/// (scripts/dptrun). A bit flip and a slow rank are survived in place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "elastic_rank.h"
#include "lighthouse.h"
#include "restart_checkpoint.h"

namespace dpt::ch16 {

/// Where a launch seals its state.
struct SealSettings {
  std::string dir;        ///< --save-checkpoint DIR ("" = no checkpoints)
  int64_t every = 5;      ///< --checkpoint-every K: after every K-th slot, and after the last
  int64_t join_at = -1;   ///< a --join's step: seal there and end the launch (-1: none)
};

/// The launch's quorum, collective over ctx's world: every process's
/// committed steps all-gathered, and your decide_quorum (ch16.h) asked with
/// them and the last launch's quorum (`run.quorum`; a first launch: every
/// rank, id 0). `round` gets what was asked and the answer.
QuorumDecision launch_quorum(Context& ctx, const RestartState& run, Lighthouse::RoundRecord& round);

/// What a launch leaves besides `run`.
struct LaunchOutcome {
  std::vector<std::string> dropped;  ///< "step 8: …": slots whose vote said no
  double seconds = 0;                ///< this process's wall time over its slots
  int relaunch_on = 0;               ///< > 0: a --join ended the launch at run.slot; go on on this many processes
};

/// This process's slots from run.slot to o.steps under quorum `q` (every
/// process of the launch): `run` is where the launch starts (the checkpoint
/// it resumed, or a fresh run) and, on return, where it ended, its ledger and
/// checksum rounds grown. Seals under `seal`; at seal.join_at (after the
/// launch's first slot) seals and returns, asking for one more process. A planned crash or freeze of
/// this rank does not return (the process is killed, or stops answering).
LaunchOutcome run_process_rank(Context& ctx, const Options& o, const Dataset& data, const FaultPlan& plan,
                               const ElasticSettings& s, const SealSettings& seal, const QuorumDecision& q,
                               RestartState& run);

}  // namespace dpt::ch16
