// ch16_fault_tolerance — ranks that fail, a run that keeps going (threads).
//
// What it teaches: a data-parallel run survives a rank's crash when (1) the
// collective in flight is abandoned on every survivor (the group is revoked,
// as ULFM's MPI_Comm_revoke), (2) the survivors agree on one membership and
// one step (a quorum, whose id names it and no other) and
// get a communicator of exactly those ranks, (3) a step is a transaction:
// the optimizer steps only after every member has voted, so a step is applied
// on all or dropped on all, and (4) the data cursor moves only with a
// committed step, so no sample is lost or seen twice. A rank that joins
// heals from a live peer (what makes it a replica, and nothing more); a flipped bit
// is found by comparing checksums and undone by rolling back to the last
// agreed state; a frozen rank is found by a bounded wait.
//
// The model is Part I's MLP: the lesson is the machinery around the step,
// and a run must take seconds; the GPT would add nothing to what fails.
//
// Run it (a bare run: 4 rank threads, the last crashes at a quarter of the
// steps and joins again at half):
//     build/reference/bin/ch16_fault_tolerance
//     build/reference/bin/ch16_fault_tolerance --fail 1@5:freeze --detect-timeout 0.5
//     build/reference/bin/ch16_fault_tolerance --fail 0@6:bitflip --check-every 4
//     build/reference/bin/ch16_fault_tolerance --fail 2@5 --keep per-rank
//     build/reference/bin/ch16_fault_tolerance --apply-before-vote     # the broken transaction: ✘
//     build/reference/bin/ch16_fault_tolerance --apply-before-vote --ring --detect-timeout 0.5  # half-applied
//     build/reference/bin/ch16_fault_tolerance --goodput --plot goodput.svg   # checkpoint interval vs goodput (goodput.h)
//     build/reference/bin/ch16_fault_tolerance --zero          # a lost ZeRO shard: checkpoint vs buddy
//
// Your holes (chapters/16_fault_tolerance/ch16.h): ch16::decide_quorum,
// assign_samples, commit_step (the end of a step as a transaction) and heal
// (what a joiner must receive to be a replica like the others).
//
// Under mpirun (restart_lecture.h) a launch is one quorum: a bit flip and a
// slow rank are survived in place, a crash or a freeze ends the launch, and
// scripts/dptrun restarts the survivors from the last sealed checkpoint:
//     mpirun -np 4 build/reference/bin/ch16_fault_tolerance --comm mpi
//     scripts/dptrun -np 4 -- build/reference/bin/ch16_fault_tolerance --batch 8 --fail 2@5 --save-checkpoint ck
//
// Left out: a real failure detector's heartbeats. Theory:
// docs/ch16_fault_tolerance.md, docs/ch16_restarts.md.
// Exit code: 0 all verdicts ✔, 3 one ✘, 1 error, 2 a bad flag, 4 (mpirun)
// a --join sealed a checkpoint and asks for a relaunch on one more process.
#include <CLI/CLI.hpp>
#include <memory>

#include "ch16_flags.h"
#include "checks.h"
#include "dpt/holes.h"
#include "dpt/lecture.h"
#include "elastic_rank.h"
#include "lighthouse.h"
#include "restart_lecture.h"
#include "run_record.h"
#include "zero_lesson.h"

using namespace dpt;
using namespace dpt::ch16;

/// What every rank thread shares: rank 0 makes it before the run.
struct Shared {
  std::unique_ptr<Lighthouse> lighthouse;
  std::unique_ptr<RunRecord> record;
  GoodputShared goodput;  ///< --goodput's checkpoint store, outside every rank
  ZeroShared zero;  ///< --zero's run (zero_lesson.h)
  bool relaunch = false;  ///< under mpirun: a --join ended the launch (restart_lecture.h)
};

void lecture(Lecture& lec, const Ch16Flags& f, Shared& shared) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  if (f.zero) return zero_lesson(lec, f, shared.zero);  // a lost ZeRO shard (zero_lesson.cpp)
  if (ctx.options.comm == "mpi") return restart_lecture(lec, f, shared.relaunch);  // a launch under mpirun (restart_lecture.h)
  if (o.steps == 0) return;
  if (f.goodput.on) return goodput_lecture(lec, f.goodput, shared.goodput);  // its own lesson (goodput.h)
  const FaultPlan plan = plan_of(f, ctx.world, o.steps);
  ElasticSettings s;
  s.world = ctx.world;
  s.keep_global_batch = f.keep == "global";
  s.check_every = f.check_every;
  s.apply_before_vote = f.apply_before_vote;
  s.ring = f.ring;

  // --------------------------------------------------------------------------
  // 1. The plan. Nobody in the run reads it but the failing ranks themselves:
  // the others learn of a failure as a real run would.
  if (ctx.is_root()) {
    say.section(str("1. ", ctx.world, " ranks, ", o.steps, " steps, ", o.batch * ctx.world, " samples per step"));
    if (plan.empty()) say.say("  no fault planned");
    for (const FaultEvent& e : plan.events()) say.say("  planned: " + e.flag);
    if (f.faults.fail.empty() && f.faults.join.empty() && !plan.empty())
      say.say("  (a bare run plans one crash and one join; --fail/--join plan your own, --no-faults none)");
    say.say("  every step: ask the lighthouse who is in (the quorum), compare checksums, heal who is behind,\n"
            "  then gradient, all-reduce, and commit_step: the step is applied on every member or on none");
    std::vector<int> first;
    std::vector<FaultEvent> spares;  // ranks whose first event is a join: booked before the run
    for (int r = 0; r < ctx.world; ++r) {
      const FaultEvent* own = nullptr;
      for (const FaultEvent& e : plan.events())
        if (e.rank == r) { own = &e; break; }
      if (own != nullptr && own->kind == FaultKind::Join)
        spares.push_back(*own);
      else
        first.push_back(r);
    }
    shared.lighthouse = std::make_unique<Lighthouse>(ctx.world, first, f.detect_s, f.detect_s);
    // A spare's machine is due at its step whenever its thread gets a core: booked here, so the quorum of that
    // step waits for it (its own registration, in its thread, could come after the others ran past the step).
    for (const FaultEvent& e : spares) shared.lighthouse->expect(e.rank, e.step);
    shared.record = std::make_unique<RunRecord>();
    shared.record->finals.resize(std::size_t(ctx.world));
    shared.record->finish_seconds.resize(std::size_t(ctx.world));
  }
  ctx.comm.barrier();  // the launch's world: never revoked, only the quorums' groups are

  // Your decide_quorum, commit_step and heal judged alone first: the run's faults never make a member say no,
  // and the run stops at its first step while any of your holes is unwritten.
  Holes holes;
  Verdicts unread;  // every rank asks your decide_quorum (a hole throws on every rank or none); rank 0 reports
  if (!holes.run(ctx.comm, [&] { add_quorum_probe_verdicts(ctx.is_root() ? lec.verdicts : unread); }) && ctx.is_root())
    say.say("  decide_quorum: not written yet (" + holes.last() + ")");
  if (!holes.run(ctx.comm, [&] { add_commit_probe_verdicts(ctx, lec.verdicts); }) && ctx.is_root())
    say.say("  commit_step: not written yet (" + holes.last() + ")");
  if (!holes.run(ctx.comm, [&] { add_heal_probe_verdicts(lec.verdicts); }, ctx.is_root()) && ctx.is_root())
    say.say("  heal: not written yet (" + holes.last() + ")");  // a private group of four, on rank 0

  // --------------------------------------------------------------------------
  // 2. The run: every rank's loop of step slots (elastic_rank.cpp)
  const bool ran = holes.run(ctx.comm, [&] {
    run_elastic_rank(ctx.rank, ctx.device, o, lec.data, plan, s, *shared.lighthouse, *shared.record);
  });  // every thread is back: a crashed rank's stands in for the machine that restarts
  if (!ctx.is_root()) return;
  if (!ran) {
    say.say("  the run: not written yet (" + holes.last() + ")");
    holes.judge(lec.verdicts);
    return;
  }

  // --------------------------------------------------------------------------
  // 3. What the lighthouse saw, what the ranks dropped, then the verdicts
  say.section("2. Quorums: each id names one quorum, never another");
  for (const std::string& line : shared.lighthouse->history()) say.say("  " + line);
  RunRecord& record = *shared.record;
  for (const std::string& d : record.dropped) say.say("  dropped " + d.substr(0, 230));
  if (!record.dropped.empty() && !s.apply_before_vote)
    say.say("  a dropped step applied nothing on any member and moved no cursor: its samples came again in the\n"
            "  next step, split over whoever was in (--keep " + f.keep + ")");
  for (const HealEntry& h : record.heals)
    say.say(str("  rank ", h.joiner, " was behind at step ", h.slot, " and healed from rank ", h.source, ": ",
                h.bytes, " B sent to it", h.collective ? str(", ", h.collective, " B through a collective") : ""));
  if (s.apply_before_vote && !s.ring)
    say.say("  --apply-before-vote: the survivors applied a step the vote then dropped. Each applied the same\n"
            "  sum, so their replicas still agree, but the weights hold an update no ledger entry accounts\n"
            "  for: the replay below disagrees, and the batch is consumed again.");
  if (s.apply_before_vote && s.ring)
    say.say("  --apply-before-vote --ring: the crash left the ring half done: the ranks downstream of it had\n"
            "  the whole sum and applied it, its upstream neighbour had none. The replicas now differ: the next\n"
            "  checksum round names the rank in the minority (the one that did NOT apply) and rolls all back.");
  say.section("3. Verdicts against the ledger's one-device replay and the plan");
  add_ch16_verdicts(lec.verdicts, lec.summary, o, lec.data, plan, s, record);
  add_quorum_verdicts(lec.verdicts, shared.lighthouse->decisions());
  add_share_verdicts(lec.verdicts, o, s, record);
  if (!holes.all_written()) holes.judge(lec.verdicts);  // a run that met no heal still names an unwritten one
  MLP last = build_model(o, Device::host());
  if (final_model(o, record, last)) lec.keep(last);  // what --save-weights writes
  for (int r = 0; r < ctx.world; ++r)
    if (plan.slowdown(r, o.steps - 1) > 1)
      lec.summary.add_row({str("rank ", r, " slowed ", plan.slowdown(r, o.steps - 1), "x"),
                           str("the run still took ", fixed(record.finish_seconds[std::size_t(r)], 2),
                               " s: every step waits for the slowest member")});
}

int main(int argc, char** argv) {
  Ch16Flags flags;
  Shared shared;
  Chapter chapter{"ch16_fault_tolerance", "fault tolerance: revoke, agree, shrink, heal, keep going"};
  chapter.default_ranks = kBareRanks;  // one crashes, three keep going
  chapter.defaults.steps = 24;
  chapter.defaults.batch = 8;
  chapter.defaults.samples = 256;
  chapter.defaults.model = "32-32-10";
  chapter.defaults.data = "synthetic";
  chapter.defaults.optimizer = "momentum";
  chapter.defaults.eval_samples = 0;
  auto add_flags = [&flags](CLI::App& app, Options& o) { add_ch16_flags(app, flags, o); };
  const int code = run_chapter(argc, argv, chapter, add_flags, [&](Lecture& lec) { lecture(lec, flags, shared); });
  return shared.relaunch && code == 0 ? kRelaunchExit : code;  // a --join under mpirun: relaunch (a ✘ stays 3)
}
