/// @file fault_plan.h
/// @brief Planned faults for a run: `--fail RANK@STEP[:KIND]` and
/// `--join RANK@STEP`, parsed, checked against the run's shape, and asked
/// "what happens to rank r at step s?".
///
///     --fail 2@5              rank 2 crashes when it reaches step 5
///     --fail 1@3:freeze       rank 1 stops answering at step 3
///     --fail 3@4:slow:8       rank 3 runs 8x slower from step 4 on
///     --fail 0@6:bitflip      one bit of one of rank 0's parameters flips before step 6
///     --join 2@9              rank 2 (crashed or frozen before, or a spare
///                             from the start) joins again at step 9
///
/// Steps count from 0, as a run's loop does. Each rank's events, in step
/// order, must make sense one after another: a rank that crashed or froze
/// does nothing until it joins; a join is for a rank that is out (a
/// join with no earlier crash or freeze makes the rank a spare that sits out
/// from step 0); at every step at least one rank is in. A plan that breaks
/// these is one sentence naming the flag (`fault_plan_problem`), for a
/// chapter's flag check (exit 2). Slow and bitflip leave the rank in.
/// What each kind does is the chapter's (chapter 16); this file only says when.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/cli_fwd.h"

namespace dpt {

/// What happens to a rank at a step.
enum class FaultKind {
  Crash,    ///< the rank throws out of the run
  Freeze,   ///< the rank stops answering (it neither sends nor receives again)
  Slow,     ///< the rank runs `factor` times slower from this step on
  BitFlip,  ///< one bit of one of its parameters flips (silent data corruption)
  Join,     ///< the rank (out until now) joins the run
};

/// "crash", "freeze", "slow", "bitflip", "join".
const char* fault_kind_name(FaultKind kind);

/// One planned event.
struct FaultEvent {
  int rank = 0;         ///< the world rank it happens to
  int64_t step = 0;     ///< the step (from 0) at whose start it happens
  FaultKind kind = FaultKind::Crash;  ///< what happens
  double factor = 1;    ///< Slow: how many times slower (> 1); else 1
  std::string flag;     ///< "--fail 2@5:crash": how the user wrote it, for messages
};

/// Parses one value of --fail ("RANK@STEP[:crash|freeze|slow[:FACTOR]|bitflip]",
/// crash when no kind is given, slow's factor 4 when none is given) or of --join
/// ("RANK@STEP", `join` true). Throws dpt::Error with a sentence that says what
/// the value must look like.
FaultEvent parse_fault_event(const std::string& value, bool join);

/// The values of `--fail` and `--join` as given (each repeatable).
struct FaultFlags {
  std::vector<std::string> fail;  ///< --fail values
  std::vector<std::string> join;  ///< --join values
};

/// Registers `--fail` and `--join` (repeatable; each value checked by
/// parse_fault_event at parse time, exit 2 with its sentence).
void add_fault_flags(CLI::App& app, FaultFlags& flags);

/// Every planned event of a run, sorted by step, then rank.
class FaultPlan {
 public:
  FaultPlan() = default;
  /// The events of `flags` (each value already valid: see add_fault_flags).
  explicit FaultPlan(const FaultFlags& flags);

  /// Every event, by step then rank.
  const std::vector<FaultEvent>& events() const { return events_; }
  /// True when nothing is planned.
  bool empty() const { return events_.empty(); }
  /// The event of `rank` at `step`, or null.
  const FaultEvent* at(int rank, int64_t step) const;
  /// The events at `step`, by rank.
  std::vector<FaultEvent> at_step(int64_t step) const;
  /// True when `rank` is in the run at the start of `step`, after that step's
  /// crash, freeze or join: a rank is in from step 0 unless its first event is
  /// a join (a spare), out from its crash or freeze, in again from its join.
  bool in_run(int rank, int64_t step) const;
  /// How many times slower `rank` runs at `step` (1 unless a Slow event at or
  /// before it says otherwise).
  double slowdown(int rank, int64_t step) const;

 private:
  std::vector<FaultEvent> events_;
};

/// "" when `plan` fits a run of `world` ranks and `steps` steps (every rank in
/// [0, world), every step in [0, steps), each rank's events in an order that
/// makes sense, at most one event per rank per step, at least one rank in at
/// every step), else one sentence naming the flag value at fault.
std::string fault_plan_problem(const FaultPlan& plan, int world, int64_t steps);

/// Carries out a Crash event for real, under mpirun (a rank is a process):
/// one line on stderr, flushed, "PROGRAM: rank R of N: --fail R@S: this
/// process kills itself (SIGKILL) at the start of step S", then SIGKILL to
/// this process (no handler, no flush, no MPI_Finalize: what the kernel's
/// out-of-memory killer or a lost node does). scripts/dptrun reads the flag
/// back from that line (the --fail value that already happened).
[[noreturn]] void kill_this_process(const std::string& program, int rank, int world, const FaultEvent& crash);

}  // namespace dpt
