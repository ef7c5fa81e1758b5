/// @file ch16_flags.h
/// @brief Chapter 16's own flags (provided): the faults, how the run keeps
/// its batch, the checksum interval, the failure detector's bound, the
/// broken transaction; --zero's lost shard. Checked once --ranks and
/// --steps are known (exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "dpt/fault_plan.h"
#include "dpt/options.h"
#include "goodput.h"
#include "restart_flags.h"

namespace dpt::ch16 {

/// A bare run's ranks: one crashes, the other three keep going.
constexpr int kBareRanks = 4;

/// What chapter 16's flags asked for.
struct Ch16Flags {
  FaultFlags faults;              ///< --fail, --join (none given: the bare run's crash and join)
  bool no_faults = false;         ///< --no-faults: a run with nothing planned
  std::string keep = "global";    ///< --keep global|per-rank
  int64_t check_every = 4;        ///< --check-every K
  double detect_s = 2.0;          ///< --detect-timeout S: a group's call, and a quorum's wait, give up after S
  bool apply_before_vote = false; ///< --apply-before-vote: the broken transaction
  bool ring = false;              ///< --ring: the gradient all-reduce as a ring of sendrecv
  GoodputFlags goodput;           ///< --goodput and its flags (goodput.h)
  bool zero = false;              ///< --zero: ZeRO-1, each member holds 1/n of the momentum (zero_rank.h)
  std::string shard_recovery = "both";  ///< --shard-recovery checkpoint|buddy|both
  int64_t checkpoint_every = 5;   ///< --checkpoint-every K: the checkpoint policy's interval
  std::string shard_mistake = "none";   ///< --shard-mistake none|stale-buddy|off-by-one: a planted bug
  RestartFlags restart;           ///< --save-checkpoint, --resume: under mpirun (restart_flags.h)
};

/// Registers the flags into `flags`; checks them against --ranks, --steps and
/// --optimizer once all are parsed (one line naming the flag, exit 2).
void add_ch16_flags(CLI::App& app, Ch16Flags& flags, Options& options);

/// The plan the run follows: the flags' events, or with none the bare run's
/// (the last rank crashes at a quarter of the steps and joins at half; none
/// on one rank or with --no-faults).
FaultPlan plan_of(const Ch16Flags& flags, int world, int64_t steps);

/// The --zero run's plan: the flags' crashes, or with none the last rank
/// crashing at 3/8 of the steps (none on one rank or with --no-faults).
FaultPlan zero_plan_of(const Ch16Flags& flags, int world, int64_t steps);

/// "" when every bit flip of `plan` meets a checksum round (every
/// `check_every` steps, and once after the last) before its rank's next
/// crash, freeze or flip; else one sentence naming the --fail value at fault.
std::string unseen_flip_problem(const FaultPlan& plan, int64_t check_every, int64_t steps);

}  // namespace dpt::ch16
