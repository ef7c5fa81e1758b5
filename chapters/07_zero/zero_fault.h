/// @file zero_fault.h
/// @brief Chapter 07's faults (provided, not a hole): `--fail RANK@STEP`
/// under mpirun kills that rank's process for real, at the start of STEP,
/// after the checkpoints of the steps before it are sealed; `--max-loss X`
/// stops a run at a loss spike (exit 5) and `--skip-batch K` resumes it past
/// the batch. What a supervisor does with both (scripts/dptrun: relaunch on
/// the survivors, or past the batch, from the latest sealed checkpoint) is
/// docs/ch16_restarts.md.
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
#include <vector>

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

/// The batch of the global order that step `step` draws when the batches
/// `skipped` are never drawn (--skip-batch): the data cursor moves past each
/// skipped batch, so step k draws k plus the number of skipped batches at or
/// before the one it draws (batch_of_step(7, {3}) = 8, batch_of_step(2, {3}) = 2).
int64_t batch_of_step(int64_t step, std::vector<int64_t> skipped);

}  // namespace dpt::ch07
