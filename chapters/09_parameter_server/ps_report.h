// ps_report.h — what the lecture prints and judges after each run: roles,
// the step check's numbers carried to rank 0 and its verdicts, bytes per
// server against theory, the staleness the arrival order implies and the
// histogram, and the straggler race. Not a hole.
#pragma once

#include <string>
#include <vector>

#include "ch09.h"
#include "dpt/evaluate.h"
#include "dpt/report.h"
#include "dpt/step_check.h"
#include "dpt/verdict.h"
#include "parameter_server.h"

namespace dpt::ch09 {

/// One line per server (its shard) and one for the workers.
std::string roles_text(const Roles& roles);

/// Collective: the first worker replays its recorded steps on one device
/// (recorder.replay) and sends the result to rank 0, which returns it (others:
/// an empty StepCheck). Nothing when !verify.
StepCheck share_step_check(Context& ctx, const Roles& roles, const StepRecorder& recorder, bool verify,
                           const Options& o, const Dataset& data);

/// Rank 0: the step check's verdicts, worded for servers and workers (the
/// harness's add_step_check_verdicts speaks of a broadcast): the first
/// worker's first parameters are the flags' model, bit for bit (only when step
/// 0 was checked), and each checked step's gradient, read back from the
/// servers' step, is one device's on the W workers' batches within
/// kStepGradientTolerance.
void add_ps_step_check_verdicts(Verdicts& v, const StepCheck& check, int workers);

/// Rank 0: the bytes each server moved per step during `run` (sync) against
/// W·Ψ_s, the ring's 2(N−1)/N·Ψ per rank, and the link model's time of both.
void bytes_section(const Narrator& say, Context& ctx, const Roles& roles, const PsRun& run, Verdicts& v,
                   Table& summary);

/// Collective (every rank): the mean over the W workers of each synchronous
/// step's loss, written by rank 0 to --metrics as {"step", "loss"} lines,
/// as every chapter's main run writes them.
void write_sync_metrics(Context& ctx, const Options& o, const PsRun& run, int workers);

/// "mean 2.99, max 3" of per-push staleness ("none" when empty).
std::string staleness_summary(const std::vector<int64_t>& staleness);
/// The staleness the arrival order `order` implies for every push, counted
/// from the order alone (sync: all 0): what the measured staleness (your
/// apply_push's) is judged against.
std::vector<int64_t> implied_staleness(Mode mode, const std::vector<int>& order);
/// The histogram (count per staleness value) and the summary, measured and implied.
std::string staleness_text(const std::vector<int64_t>& measured, const std::vector<int64_t>& implied);

/// The largest number of steps any worker had finished beyond the slowest,
/// over the whole arrival order of `workers` workers.
int64_t largest_lead(const std::vector<int>& order, int workers);

/// A model of the flags' architecture holding `params` (Ψ floats), on the host.
MLP model_of(const Options& o, const std::vector<float>& params);
/// Held-out accuracy of `model` (training-set accuracy when held-out is off).
double accuracy(const MLP& model, const Dataset& data, const HeldOut& held_out);

/// Rank 0: the verdict on ssp's bound for an ssp arrival order `order` of
/// `workers` workers, one `slowdown` times slower, over `model_time` normal
/// steps: the fastest finishes exactly s + 1 steps ahead when the run is long
/// enough to get there, at most s + 1 otherwise.
void add_ssp_bound_verdict(Verdicts& v, const std::vector<int>& order, int workers, int max_staleness,
                           double slowdown, double model_time);

/// Sync: where apply_push closed each round of `workers` pushes of `order`
/// (`applied`: PsRun::applied). Sets ok = true when every round closed on
/// its last push and nowhere else, and says so ("300 rounds, each closed
/// …"); otherwise ok = false and the first round that did not, in words.
std::string round_closes_text(const std::vector<bool>& applied, const std::vector<int>& order, int workers,
                              bool& ok);

/// One mode's run in the straggler race.
struct RaceLane {
  Mode mode;                 ///< sync, async or ssp
  int64_t pushes = 0;        ///< gradients applied
  double seconds = 0;        ///< measured wall time
  double model_time = 0;     ///< the arrival order's makespan, in normal steps
  double accuracy = 0;       ///< held-out accuracy at the end
  std::vector<int64_t> staleness;  ///< server 0's per-push staleness
  std::vector<int> order;    ///< the arrival order it ran
};

/// Rank 0: the race table (throughput measured vs the step-time model,
/// staleness, accuracy at equal time) and its verdict on ssp's bound (reached
/// exactly when the run is long enough for the fast workers to get there).
void race_section(const Narrator& say, const std::vector<RaceLane>& lanes, int workers, int max_staleness,
                  double slowdown, Verdicts& v, Table& summary);

}  // namespace dpt::ch09
