/// @file goodput.h
/// @brief Chapter 16's goodput sweep (`--goodput`; provided): how much of a
/// wall-second is useful training when a rank fails every MTBF steps on
/// average and every failure sends the whole job back to its last checkpoint,
/// for several checkpoint intervals C, next to Young and Daly's optimum
/// C* = √(2 · checkpoint cost · MTBF).
///
/// This is the restart that TorchElastic does (and scripts/dptrun under
/// mpirun): every rank stops, the job restarts, every rank reads the last
/// sealed checkpoint and the steps after it are computed again. The rest of
/// the chapter shrinks in place and loses at most the step in flight; here
/// the interval decides what a failure costs, and a checkpoint's own cost
/// decides how often one can afford to write it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "dpt/lecture.h"
#include "run_record.h"

namespace dpt::ch16 {

/// What --goodput and its flags asked for.
struct GoodputFlags {
  bool on = false;                                    ///< --goodput: run the sweep instead of the fault run
  std::vector<int64_t> intervals = {1, 2, 4, 8, 16};  ///< --intervals: the checkpoint intervals C, in steps
  double mtbf_steps = 16;                             ///< --mtbf: mean step times between failures (exponential)
  double checkpoint_steps = 0.5;                      ///< --checkpoint-cost: the modelled write, in step times
  int64_t useful_steps = 128;                         ///< --goodput-steps: committed steps each run must reach
  std::string plot;                                   ///< --plot FILE.svg: goodput against C, C* marked
};

/// Registers the flags above (validated: one line naming the flag, exit 2).
void add_goodput_flags(CLI::App& app, GoodputFlags& flags);

/// "" when the flags go together, else one sentence starting with the flag at
/// fault: --intervals not ascending, --plot without --goodput, --goodput with
/// the fault run's own plan (`fault_flags`: --fail, --join, --apply-before-vote, --ring).
std::string goodput_flags_problem(const GoodputFlags& flags, bool fault_flags);

/// The sweep's failure clock, in step times: a step slot lasts 1, a
/// checkpoint write `--checkpoint-cost`. Failures arrive as a Poisson process
/// (exponential gaps of mean MTBF, seeded: the same times for every C) or at
/// times given, and hit whatever runs then: a step slot or a write. Every
/// rank keeps its own copy; the same calls give the same answers on each.
class GoodputClock {
 public:
  /// Failures with exponential gaps of mean `mtbf` step times, drawn from `seed`.
  GoodputClock(double mtbf, uint64_t seed);
  /// Failures at the step times `at` (ascending), then none.
  explicit GoodputClock(std::vector<double> at);
  /// A step slot from now(): true when a failure hit it (the step in flight
  /// is lost). It ends one step time later either way (it was computed); the
  /// failures that fall inside it are one failure.
  bool step();
  /// A checkpoint write of `length` step times from now(): the share of it
  /// written when a failure hit, in [0, 1), and now() is then the failure's
  /// time; −1 when none hit and the write lasted `length`.
  double write(double length);
  /// Step times since the run began.
  double now() const { return now_; }

 private:
  void next();  // moves next_at_ to the failure after it
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  std::vector<double> given_;
  bool drawn_ = true;
  std::size_t taken_ = 0;
  double next_at_ = 0;
  double now_ = 0;
};

/// The checkpoint store: outside every rank (it survives a crash), written by
/// rank 0 and sealed (the staging copy becomes the one a restart reads only
/// once it is whole: a write a failure cuts short is never sealed), read by
/// every rank after a failure. In memory, not a file: see goodput.cpp.
struct GoodputStore {
  std::vector<float> params;    ///< flat, Ψ
  std::vector<float> momentum;  ///< flat, Ψ
  int64_t committed = 0;                ///< committed steps it holds
  int64_t cursor = 0;                   ///< the data cursor then
};

/// What every rank thread shares for the sweep; main() owns it.
struct GoodputShared {
  std::mutex mutex;                 ///< guards the stores
  GoodputStore staging;             ///< the write in progress
  GoodputStore sealed;              ///< the last sealed checkpoint
  std::vector<LedgerEntry> ledger;  ///< rank 0's committed steps of the current run (cut back on a rollback)
};

/// One checkpoint interval's run, as rank 0 measured it.
struct GoodputRow {
  int64_t interval = 0;       ///< C
  int64_t executed = 0;       ///< step slots computed (useful + lost)
  int64_t committed = 0;      ///< useful steps reached (the target unless the slot cap hit)
  int64_t failures = 0;       ///< failures that hit the run
  int64_t lost = 0;           ///< steps computed and thrown away (rolled back, or the step in flight)
  int64_t checkpoints = 0;    ///< checkpoints written and sealed
  int64_t writes_lost = 0;    ///< checkpoint writes a failure cut short (never sealed; each counts in failures)
  double lost_share = 0;      ///< Σ over those writes of the share written before the failure
  double lost_write_s = 0;    ///< seconds in those writes
  double checkpoint_s = 0;    ///< seconds in sealed checkpoints (rank 0: write, seal)
  double recovery_s = 0;      ///< seconds from a failure to every rank restored
  int64_t restore_bytes = 0;  ///< bytes read from the store by every rank over every recovery
  double wall_s = 0;          ///< the run's wall time
  double goodput = 0;         ///< committed / wall_s: useful steps per second
  double replay_gap = 0;      ///< max |w − one device replaying the run's ledger|
  bool exactly_once = false;  ///< the ledger consumed every sample of every epoch once
  std::string once_seen;      ///< what the exactly-once check saw
};

/// The sweep, on every rank of lec's run: one run per interval, then (rank 0)
/// the table, --plot, and the verdicts.
void goodput_lecture(Lecture& lec, const GoodputFlags& flags, GoodputShared& shared);

/// Rank 0's part after the runs (goodput_report.cpp): the table, the chart,
/// the verdicts. `step_s` is the measured mean seconds of a step slot,
/// `checkpoint_s` of one checkpoint.
void report_goodput(Lecture& lec, const GoodputFlags& flags, const std::vector<GoodputRow>& rows, double step_s,
                    double checkpoint_s);

}  // namespace dpt::ch16
