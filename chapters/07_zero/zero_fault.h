/// @file zero_fault.h
/// @brief Chapter 07's planned crash (provided, not a hole): `--fail RANK@STEP`
/// under mpirun kills that rank's process for real, at the start of STEP,
/// after the checkpoints of the steps before it are sealed. What a supervisor
/// does next (scripts/dptrun: relaunch on the survivors, resume from the
/// latest sealed checkpoint) is docs/ch16_restarts.md.
///
///     mpirun -np 4 ch07_zero --comm mpi --steps 10 --save-checkpoint ck --checkpoint-every 2 --fail 2@5
///
/// Only `crash`, and only under mpirun: a rank thread cannot die alone (the
/// process is every rank), and freeze, slow and bitflip are chapter 16's
/// (threads), where the survivors can do something about them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "dpt/fault_plan.h"
#include "dpt/launch.h"

namespace dpt::ch07 {

/// "" when chapter 07 can carry out `faults` on a run of `world` ranks under
/// `comm` ("threads", "mpi", "nccl") for `steps` steps, else one sentence
/// naming the flag (for the flag check: exit 2).
std::string zero_fault_problem(const FaultFlags& faults, const std::string& comm, int world, int64_t steps);

/// The hook ZeroCheckpoints::starting runs at the start of every step: at
/// the step of this rank's planned crash, one line on stderr naming the rank,
/// the flag and the step, then SIGKILL to this process (no handler, no flush,
/// no MPI_Finalize: what the kernel's out-of-memory killer or a lost node
/// does). Null when nothing is planned for any rank.
std::function<void(int64_t step)> planned_crash(const Context& ctx, const FaultFlags& faults);

}  // namespace dpt::ch07
