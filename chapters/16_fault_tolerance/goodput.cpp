// goodput.cpp — the goodput sweep's runs (goodput.h): one data-parallel run
// per checkpoint interval C, every rank a thread, failures drawn once and the
// same for every C (so the runs differ only in C).
//
// A run, on every rank, until --goodput-steps steps are committed:
//
//   step        gradient of this rank's shard, all-reduce (Sum), momentum SGD
//   failure?    the slot's step was in flight: it is lost, the crashed rank
//               starts as a new process, every rank reads the sealed store
//               (parameters, momentum, step, cursor): the steps since it are
//               computed again
//   checkpoint  every C committed steps: rank 0 writes the staging copy,
//               then seals it; the others wait (a synchronous checkpoint).
//               A failure during the write leaves it torn and unsealed: the
//               restart reads the last sealed one, C steps back
//
// The store is memory, not a temp dir: this model's state is a few KB, which
// a file system writes in microseconds or, on a shared machine, whenever it
// likes. A real job's checkpoint is gigabytes to remote storage and costs
// seconds to minutes, a sizeable fraction of its step time; the modelled
// write (--checkpoint-cost, in step times, as the link model stands in for a
// network) gives this run the same ratio. What is judged is the measured
// cost: the copy, the modelled write and the seal, as timed.
//
// Failures arrive as a Poisson process over the run's modelled time (a step
// slot is one step time, a write --checkpoint-cost of them; GoodputClock),
// the failure model Young's formula assumes, so a write is hit as often as
// its length says.
#include "goodput.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "ch16.h"
#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "elastic_rank_parts.h"
#include "replay.h"

namespace dpt::ch16 {

namespace {

using parts::RankState;
using parts::SteadyClock;
using parts::seconds_since;

// One step slot's gradient on this rank, summed over the ranks (each rank's
// shard mean weighted into the global batch's mean), and its samples.
std::vector<float> goodput_gradient(Context& ctx, const Options& o, const Dataset& data, RankState& st,
                                    std::vector<int64_t>& batch) {
  const int64_t global = o.batch * ctx.world;
  batch.resize(std::size_t(global));
  for (int64_t i = 0; i < global; ++i) batch[std::size_t(i)] = sample_at(st.cursor + i, data.size(), o.seed);
  const int64_t lo = ctx.rank * global / ctx.world, hi = (ctx.rank + 1) * global / ctx.world;
  std::vector<int64_t> shard(batch.begin() + lo, batch.begin() + hi);
  for (Tensor& p : st.params) p.zero_grad();
  Batch b = gather_batch(data, shard, ctx.device);
  softmax_cross_entropy(st.model.forward(b.x), b.y).backward();
  std::vector<float> grad;
  const float weight = float(hi - lo) / float(global);
  for (const Tensor& p : st.params) {
    std::vector<float> g = p.grad().to_vector();
    for (float& x : g) x *= weight;
    grad.insert(grad.end(), g.begin(), g.end());
  }
  ctx.comm.all_reduce(grad.data(), int64_t(grad.size()), ReduceOp::Sum);
  return grad;
}

// Rank 0 writes the state into the staging copy over the modelled write,
// then seals it: only a whole copy becomes the one a restart reads. A failure
// `struck` (a share, GoodputClock::write) into the write leaves that share of
// the floats new and the rest as the staging copy held them: torn, unsealed.
void goodput_write(GoodputShared& shared, RankState& st, double write_s, double struck) {
  std::lock_guard<std::mutex> lock(shared.mutex);
  const std::vector<float> params = parts::flat_parameters(st);
  GoodputStore& out = shared.staging;
  out.params.resize(params.size());
  out.momentum.resize(st.momentum.size());
  const double share = struck < 0 ? 1.0 : struck;
  const std::size_t total = params.size() + st.momentum.size();
  const std::size_t done = struck < 0 ? total : std::size_t(share * double(total));
  for (std::size_t k = 0; k < done; ++k)
    if (k < params.size()) out.params[k] = params[k];
    else out.momentum[k - params.size()] = st.momentum[k - params.size()];
  const auto until = SteadyClock::now() +
                     std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(share * write_s));
  while (SteadyClock::now() < until) {}  // busy, as a write is: a sleep overshoots by more than a step here
  if (struck >= 0) return;  // cut short: the last sealed checkpoint stays the restart point
  out.committed = st.committed;
  out.cursor = st.cursor;
  std::swap(shared.sealed, shared.staging);  // the seal
}

void goodput_restore(GoodputShared& shared, RankState& st) {
  std::lock_guard<std::mutex> lock(shared.mutex);
  parts::set_flat_parameters(st, shared.sealed.params);
  st.momentum = shared.sealed.momentum;
  st.committed = shared.sealed.committed;
  st.cursor = shared.sealed.cursor;
}

struct GoodputPlan {
  int64_t interval = 1;
  double mtbf = 16;        // step times
  uint64_t seed = 0;       // the failures' draws, the same for every C
  double write_cost = 0;   // the modelled write, in step times
  double write_s = 0;      // the same, in seconds
  int64_t max_slots = 0;   // a run that cannot finish stops here
};

GoodputRow goodput_run(Lecture& lec, GoodputShared& shared, const GoodputFlags& f, const GoodputPlan& plan) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  GoodputRow row;
  row.interval = plan.interval;
  RankState st = parts::fresh_state(o, ctx.device);
  const int64_t state_bytes = int64_t(4 * (st.momentum.size() * 2) + 16);
  if (ctx.is_root()) {  // step 0 needs no write: the seeded model is the state every restart can rebuild
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.sealed = GoodputStore{parts::flat_parameters(st), st.momentum, 0, 0};
    shared.ledger.clear();
  }
  ctx.comm.barrier();
  const auto t0 = SteadyClock::now();
  GoodputClock clock(plan.mtbf, plan.seed);  // every rank's copy: the same failures
  std::vector<int64_t> batch;
  // A failure: one rank starts as a new process, every rank reads the sealed store; `in_flight` steps are lost
  // besides the committed ones since the store's.
  auto restart = [&](int64_t in_flight) {
    const auto t_fail = SteadyClock::now();
    const int64_t before = st.committed;
    if (ctx.rank == int(row.failures % ctx.world)) st = parts::fresh_state(o, ctx.device);
    goodput_restore(shared, st);
    ctx.comm.barrier();  // every rank restored: the job goes on
    ++row.failures;
    row.lost += in_flight + (before - st.committed);
    row.recovery_s += seconds_since(t_fail);
    row.restore_bytes += state_bytes * ctx.world;
    if (ctx.is_root()) shared.ledger.resize(std::size_t(st.committed));
  };
  while (st.committed < f.useful_steps && row.executed < plan.max_slots) {
    std::vector<float> grad = goodput_gradient(ctx, o, lec.data, st, batch);
    ++row.executed;
    if (clock.step()) {  // the step in flight is lost
      restart(1);
      continue;
    }
    Replica replica{parts::flat_parameters(st), std::move(st.momentum)};
    apply_momentum(replica, grad, o.lr);
    parts::set_flat_parameters(st, replica.params);
    st.momentum = std::move(replica.momentum);
    ++st.committed;
    st.cursor += o.batch * ctx.world;
    if (ctx.is_root()) shared.ledger.push_back(LedgerEntry{row.executed - 1, 0, ctx.world, o.lr, batch, {}});
    if (st.committed % plan.interval == 0 && st.committed < f.useful_steps) {
      const double struck = clock.write(plan.write_cost);
      const auto t_write = SteadyClock::now();
      if (ctx.is_root()) goodput_write(shared, st, plan.write_s, struck);
      ctx.comm.barrier();  // sealed, or cut short: every rank knows which
      if (struck < 0) {
        ++row.checkpoints;
        row.checkpoint_s += seconds_since(t_write);
      } else {  // nothing in flight: the C steps since the last sealed one are what is lost
        ++row.writes_lost;
        row.lost_share += struck;
        row.lost_write_s += seconds_since(t_write);
        restart(0);
      }
    }
  }
  row.wall_s = seconds_since(t0);
  row.committed = st.committed;
  row.goodput = double(row.committed) / row.wall_s;
  if (ctx.is_root()) {
    row.replay_gap = max_abs_difference(parts::flat_parameters(st), replay_ledger(o, lec.data, shared.ledger));
    const ExactlyOnce once = check_exactly_once(shared.ledger, lec.data.size());
    row.exactly_once = once.ok;
    row.once_seen = once.seen;
  }
  ctx.comm.barrier();  // nobody starts the next run while rank 0 still reads the ledger
  return row;
}

// Mean seconds of a step slot, timed over a few steps before the sweep: the
// unit of the modelled checkpoint write.
double goodput_step_seconds(Lecture& lec) {
  Context& ctx = lec.ctx();
  RankState st = parts::fresh_state(lec.o, ctx.device);
  std::vector<int64_t> batch;
  goodput_gradient(ctx, lec.o, lec.data, st, batch);  // the first one pays for warming up
  const auto t0 = SteadyClock::now();
  const int kSteps = 8;
  for (int i = 0; i < kSteps; ++i) goodput_gradient(ctx, lec.o, lec.data, st, batch);
  return seconds_since(t0) / kSteps;
}

}  // namespace

GoodputClock::GoodputClock(double mtbf, uint64_t seed) : rng_(seed ^ 0x9e3779b97f4a7c15ULL), gap_(1.0 / mtbf) {
  next();
}

GoodputClock::GoodputClock(std::vector<double> at) : given_(std::move(at)), drawn_(false) { next(); }

void GoodputClock::next() {
  if (drawn_) next_at_ += gap_(rng_);
  else next_at_ = taken_ < given_.size() ? given_[taken_++] : std::numeric_limits<double>::infinity();
}

bool GoodputClock::step() {
  const bool hit = next_at_ < now_ + 1;
  now_ += 1;
  while (next_at_ < now_) next();  // the job was down already: one failure per slot
  return hit;
}

double GoodputClock::write(double length) {
  if (!(next_at_ < now_ + length)) {
    now_ += length;
    return -1;
  }
  const double share = (next_at_ - now_) / length;
  now_ = next_at_;
  next();
  return share;
}

void add_goodput_flags(CLI::App& app, GoodputFlags& f) {
  app.add_flag("--goodput", f.on, "Run the goodput sweep instead of the fault run: a failure every --mtbf steps on "
                                  "average rolls the job back to its last checkpoint, for each --intervals C");
  app.add_option("--intervals", f.intervals, "--goodput: checkpoint intervals C in steps, comma-separated")
      ->delimiter(',')->check(integer_in(1, 100000))->capture_default_str();
  app.add_option("--mtbf", f.mtbf_steps, "--goodput: mean step times between failures (exponential gaps; a "
                                         "checkpoint write lasts --checkpoint-cost step times and can be hit too)")
      ->check(number_from(1, 1e6))->capture_default_str();
  app.add_option("--checkpoint-cost", f.checkpoint_steps, "--goodput: the modelled checkpoint write, in step times")
      ->check(number_from(0, 1000))->capture_default_str();
  app.add_option("--goodput-steps", f.useful_steps, "--goodput: committed steps every run must reach")
      ->check(integer_in(1, 100000))->capture_default_str();
  add_output(app, "--plot", f.plot, "--goodput: SVG of goodput against C with Young/Daly's C* marked");
}

std::string goodput_flags_problem(const GoodputFlags& f, bool fault_flags) {
  for (std::size_t i = 1; i < f.intervals.size(); ++i)
    if (f.intervals[i] <= f.intervals[i - 1])
      return "--intervals: expects ascending intervals, got " + std::to_string(f.intervals[i - 1]) + " then " +
             std::to_string(f.intervals[i]);
  if (!f.plot.empty() && !f.on) return "--plot: draws the goodput sweep: give --goodput with it";
  if (f.on && fault_flags)
    return "--goodput: plans its own failures (--mtbf) and restarts from checkpoints: leave out --fail, --join, "
           "--apply-before-vote and --ring";
  return "";
}

void goodput_lecture(Lecture& lec, const GoodputFlags& f, GoodputShared& shared) {
  Context& ctx = lec.ctx();
  const double step_s = goodput_step_seconds(lec);  // rank 0's is the one used: only rank 0 writes
  GoodputPlan plan;
  plan.mtbf = f.mtbf_steps;
  plan.seed = lec.o.seed;
  plan.write_cost = f.checkpoint_steps;
  plan.write_s = f.checkpoint_steps * step_s;
  plan.max_slots = 50 * f.useful_steps;
  if (ctx.is_root()) {
    lec.say.section(str("1. Goodput: ", ctx.world, " ranks, ", f.useful_steps, " useful steps per run, a failure every ",
                        fmt(f.mtbf_steps, 3), " steps on average"));
    lec.say.say("  every failure restarts the job from its last sealed checkpoint (TorchElastic's restart, not this\n"
                "  chapter's in-place shrink): the steps since it are computed again. A checkpoint every C steps\n"
                "  costs its write each time; a long C loses more at each failure. The failures are the same draws\n"
                "  for every C.");
  }
  std::vector<GoodputRow> rows;
  double executed_s = 0, checkpoint_s = 0;
  int64_t executed = 0, checkpoints = 0;
  for (int64_t c : f.intervals) {
    plan.interval = c;
    rows.push_back(goodput_run(lec, shared, f, plan));
    const GoodputRow& r = rows.back();
    executed_s += r.wall_s - r.checkpoint_s - r.lost_write_s - r.recovery_s;
    executed += r.executed;
    checkpoint_s += r.checkpoint_s;
    checkpoints += r.checkpoints;
  }
  if (!ctx.is_root()) return;
  report_goodput(lec, f, rows, executed_s / double(executed), checkpoints ? checkpoint_s / double(checkpoints) : 0);
}

}  // namespace dpt::ch16
