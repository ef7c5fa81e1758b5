/// @file restart_flags.h
/// @brief Chapter 16 under mpirun (provided): the flags of a run that is
/// restarted rather than kept going in place (--save-checkpoint, --resume),
/// the plan a bare mpirun run follows, and what mpirun cannot do.
///
/// Open MPI 4.1 has no ULFM: a process that dies ends the job. So under
/// mpirun each launch is one quorum, a crash or a freeze ends the launch, and
/// scripts/dptrun relaunches the survivors from the last sealed checkpoint
/// (TorchElastic's restart). What survives in place (a bit flip, a slow
/// rank) is the same lesson as under threads. docs/ch16_restarts.md.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "dpt/fault_plan.h"

namespace dpt::ch16 {

/// What the restart flags asked for (mpirun only).
struct RestartFlags {
  std::string save_checkpoint;  ///< --save-checkpoint DIR: seal the run's state every --checkpoint-every slots and at the end
  std::string resume;           ///< --resume DIR or DIR/step-S: go on from that sealed checkpoint, on any number of ranks
};

/// Registers --save-checkpoint and --resume into `flags`.
void add_restart_flags(CLI::App& app, RestartFlags& flags);

/// A launch's exit code when a --join ended it (0 all ✔, 3 one ✘, 1 error,
/// 2 a bad flag): it sealed a checkpoint at the join's step and asks for a
/// relaunch with one more process (scripts/dptrun does it).
constexpr int kRelaunchExit = 4;

/// The plan of a launch under mpirun: the flags' --fail events (a --join
/// ends the launch instead: mpi_joins); with none, a bare
/// run's bit flip on the last rank at a quarter of the steps (a fault the
/// launch survives in place; none on one rank, with --no-faults, under 4
/// steps, or when `resuming`: a relaunch runs only what is left of its plan).
FaultPlan mpi_plan_of(const FaultFlags& faults, bool no_faults, bool resuming, int world, int64_t steps);

/// The --fail values a launch that starts at step `first` still carries out
/// or judges: those at or after `first`, and every bit flip (one before it
/// was found by a checksum round that the checkpoint recorded). A crash, a
/// freeze or a slowdown before it happened to a process of an earlier launch.
FaultFlags launch_faults(const FaultFlags& faults, int64_t first);

/// The --join events, by step. Under mpirun a join is TorchElastic's
/// scale-up: at its step the launch seals a checkpoint and ends, asking for
/// a relaunch on one more process, which is the joining rank.
std::vector<FaultEvent> mpi_joins(const FaultFlags& faults);

/// "" when the flags of a launch fit `comm` (under mpi: a launch of `world`
/// processes and `steps` steps), else one sentence naming the flag: the
/// restart flags only under mpirun; under mpirun a --join needs
/// --save-checkpoint and names the next rank (the k-th join by step: rank
/// world + k), and none of the lessons that need ranks to live on in one
/// process (--zero, --goodput, --ring, --apply-before-vote, --detect-timeout).
std::string restart_flags_problem(const CLI::App& app, const RestartFlags& flags, const FaultFlags& faults,
                                  const std::string& comm, int world, int64_t steps);

}  // namespace dpt::ch16
