// restart_lecture.cpp — chapter 16 under mpirun (restart_lecture.h): a
// launch is one quorum; a bit flip and a slow rank are survived in place, a
// crash or a freeze ends the launch and scripts/dptrun starts the next one
// on the survivors from the last sealed checkpoint, as TorchElastic does.
#include "restart_lecture.h"

#include <algorithm>
#include <cstdio>

#include "checks.h"
#include "dpt/holes.h"
#include "dpt/sharded_checkpoint.h"
#include "elastic_rank_parts.h"
#include "process_rank.h"
#include "restart_checkpoint.h"
#include "restart_flags.h"

namespace dpt::ch16 {

namespace {

// A first launch: the flags' model, zero momentum, nothing committed, N0 = this launch's processes.
RestartState fresh_run(const Options& o, int world) {
  const parts::RankState fresh = parts::fresh_state(o, Device::host());
  RestartState run;
  run.params = parts::flat_parameters(fresh);
  run.momentum = fresh.momentum;
  run.first_world = world;
  return run;
}

void say_plan(Lecture& lec, const Ch16Flags& f, const FaultPlan& plan, const RestartState& run, int64_t global) {
  const Narrator& say = lec.say;
  say.section(str("1. ", lec.ctx().world, " processes under mpirun, ", lec.o.steps, " steps, ", global,
                  " samples per step"));
  if (!f.restart.resume.empty())
    say.say(str("  resumed at step ", run.slot, " from ", f.restart.resume, ": ", run.committed,
                " committed steps in its ledger, cursor ", run.cursor, ", quorum ", run.quorum.id, " ",
                rank_set_text(run.quorum.members), " sealed it"));
  if (plan.empty() && f.faults.join.empty()) say.say("  no fault planned");
  for (const FaultEvent& e : plan.events())
    say.say("  planned: " + e.flag + (e.step < run.slot ? " (in an earlier launch: its checksum round is on record)" : ""));
  for (const std::string& value : f.faults.fail)
    if (launch_faults({{value}, {}}, run.slot).fail.empty())
      say.say("  --fail " + value + ": before this launch's first step, in an earlier launch: not again");
  for (const FaultEvent& e : mpi_joins(f.faults))
    say.say(str("  planned: ", e.flag, e.step <= run.slot ? " (at or before this launch's first step: not again)"
                                                          : ": the launch seals that step and ends, for a relaunch "
                                                            "on one more process"));
  if (f.faults.fail.empty() && !plan.empty())  // the bare run's
    say.say("  (a bare run under mpirun plans a bit flip, which the launch survives in place. A crash or a freeze\n"
            "  ends an mpirun job: Open MPI has no ULFM. Run it under scripts/dptrun with --save-checkpoint DIR,\n"
            "  and the survivors go on from the last sealed checkpoint: docs/ch16_restarts.md)");
  say.say("  the launch is one quorum; every step: compare checksums every --check-every steps, then gradient,\n"
          "  all-reduce, and commit_step: the step is applied on every process or on none");
}

// Every process's final weights and wall time, on rank 0.
void gather_finals(Context& ctx, const RestartState& run, RunRecord& record, double seconds) {
  const int64_t psi = int64_t(run.params.size());
  std::vector<float> all(std::size_t(psi * ctx.world));
  ctx.comm.all_gather(run.params.data(), all.data(), psi);
  record.finish_seconds = ctx.comm.all_gather(seconds);
  record.finals.clear();
  for (int r = 0; r < ctx.world; ++r)
    record.finals.emplace_back(all.begin() + r * psi, all.begin() + (r + 1) * psi);
}

// One line on stderr (--quiet or not: scripts/dptrun reads it) saying that a
// --join ended the launch at the step it sealed, and how it goes on.
void asked_for_relaunch(const Ch16Flags& f, const RestartState& run, int processes) {
  std::string flag;
  for (const FaultEvent& e : mpi_joins(f.faults))
    if (e.step == run.slot) flag = e.flag;
  const std::string dir = checkpoint_step_dir(f.restart.save_checkpoint, run.slot);
  std::fprintf(stderr, "ch16_fault_tolerance: %s: sealed step %lld in %s; this launch ends, and a relaunch on %d "
               "processes goes on from it (scripts/dptrun relaunches it; by hand: mpirun -np %d ... --resume %s)\n",
               flag.c_str(), static_cast<long long>(run.slot), f.restart.save_checkpoint.c_str(), processes,
               processes, dir.c_str());
  std::fflush(stderr);
}

}  // namespace

void restart_lecture(Lecture& lec, const Ch16Flags& f, bool& relaunch) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  if (o.steps == 0) return;
  RestartState run = f.restart.resume.empty() ? fresh_run(o, ctx.world)
                                              : load_restart_checkpoint(f.restart.resume, o, f.keep);
  DPT_CHECK(run.slot <= o.steps, "--resume " << f.restart.resume << ": the checkpoint is at step " << run.slot
                                             << ", past --steps " << o.steps << "; give --steps " << run.slot
                                             << " or more");
  const FaultPlan plan = mpi_plan_of(launch_faults(f.faults, run.slot), f.no_faults, !f.restart.resume.empty(),
                                     ctx.world, o.steps);
  ElasticSettings s;
  s.world = run.first_world;  // N0, for --keep: the run's first launch
  s.keep_global_batch = f.keep == "global";
  s.check_every = f.check_every;
  if (ctx.is_root()) say_plan(lec, f, plan, run, s.keep_global_batch ? o.batch * s.world : o.batch * ctx.world);

  // Your decide_quorum and commit_step judged alone first, as under threads.
  Holes holes;
  Verdicts unread;
  if (!holes.run(ctx.comm, [&] { add_quorum_probe_verdicts(ctx.is_root() ? lec.verdicts : unread); }) && ctx.is_root())
    say.say("  decide_quorum: not written yet (" + holes.last() + ")");
  if (!holes.run(ctx.comm, [&] { add_commit_probe_verdicts(ctx, lec.verdicts); }) && ctx.is_root())
    say.say("  commit_step: not written yet (" + holes.last() + ")");

  // --------------------------------------------------------------------------
  // 2. The launch's quorum, then its slots (process_rank.cpp)
  Lighthouse::RoundRecord round;
  QuorumDecision q;
  const QuorumDecision last = run.quorum;  // the sealing launch's (run_process_rank hands on this one's)
  if (!holes.run(ctx.comm, [&] { q = launch_quorum(ctx, run, round); })) {
    if (ctx.is_root()) say.say("  the quorum: not written yet (" + holes.last() + ")"), holes.judge(lec.verdicts);
    return;
  }
  const bool lawful = broken_quorum_law(round.asked, q).first.empty();
  LaunchOutcome outcome;
  SealSettings seal{f.restart.save_checkpoint, f.checkpoint_every, -1};
  for (const FaultEvent& e : mpi_joins(f.faults))
    if (e.step > run.slot && seal.join_at < 0) seal.join_at = e.step;  // the launch's first join ends it
  const bool ran = lawful && holes.run(ctx.comm, [&] { outcome = run_process_rank(ctx, o, lec.data, plan, s, seal, q, run); });
  relaunch = ran && outcome.relaunch_on > 0;
  if (relaunch && ctx.is_root()) asked_for_relaunch(f, run, outcome.relaunch_on);
  if (relaunch) return;
  RunRecord record;
  if (ran) gather_finals(ctx, run, record, outcome.seconds);
  if (!ctx.is_root()) return;
  say.section("2. The launch's quorum: the id changes exactly when the membership does");
  say.say(str("  step ", round.slot, ": quorum ", q.id, " = ", rank_set_text(q.members),
              f.restart.resume.empty() ? " (the first launch)"
                                       : str(", after quorum ", last.id, " = ", rank_set_text(last.members),
                                             " of the launch that sealed the checkpoint")));
  if (!lawful || !ran) {
    if (!ran && lawful) say.say("  the run: not written yet (" + holes.last() + ")"), holes.judge(lec.verdicts);
    add_quorum_verdicts(lec.verdicts, {round});
    return;
  }
  for (const std::string& d : outcome.dropped) say.say("  dropped " + d);

  // --------------------------------------------------------------------------
  // 3. The verdicts, on the whole run: the ledger holds every launch's steps
  say.section("3. Verdicts against the ledger's one-device replay and the plan, across every launch");
  record.ledger = run.ledger;
  record.mismatches = run.mismatches;
  record.dropped = outcome.dropped;
  record.checks = run.checks;
  ElasticSettings launch = s;
  launch.world = ctx.world;  // who finishes: this launch's processes
  add_ch16_verdicts(lec.verdicts, lec.summary, o, lec.data, plan, launch, record);
  add_quorum_verdicts(lec.verdicts, {round});
  add_ledger_id_verdict(lec.verdicts, record.ledger);
  add_share_verdicts(lec.verdicts, o, s, record);
  MLP model = build_model(o, Device::host());
  if (final_model(o, record, model)) lec.keep(model);  // what --save-weights writes
  const double fastest = *std::min_element(record.finish_seconds.begin(), record.finish_seconds.end());
  for (int r = 0; r < ctx.world; ++r)
    if (plan.slowdown(r, o.steps - 1) > 1)
      lec.summary.add_row({str("rank ", r, " slowed ", plan.slowdown(r, o.steps - 1), "x"),
                           str("every process took at least ", fixed(fastest, 2),
                               " s: every step waits for the slowest member")});
  if (!f.restart.save_checkpoint.empty())
    lec.summary.add_row({"sealed", f.restart.save_checkpoint + " (a relaunch goes on from its latest step)"});
}

}  // namespace dpt::ch16
