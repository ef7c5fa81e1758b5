// ch16_flags.cpp — chapter 16's flags and their checks (ch16_flags.h).
#include "ch16_flags.h"

#include <algorithm>
#include <string>

#include "dpt/launch.h"

namespace dpt::ch16 {

FaultPlan plan_of(const Ch16Flags& flags, int world, int64_t steps) {
  if (flags.no_faults || !flags.faults.fail.empty() || !flags.faults.join.empty() || world < 2 || steps < 4)
    return flags.no_faults ? FaultPlan{} : FaultPlan(flags.faults);
  FaultFlags bare;
  bare.fail.push_back(std::to_string(world - 1) + "@" + std::to_string(steps / 4));
  bare.join.push_back(std::to_string(world - 1) + "@" + std::to_string(steps / 2));
  return FaultPlan(bare);
}

FaultPlan zero_plan_of(const Ch16Flags& flags, int world, int64_t steps) {
  if (flags.no_faults || !flags.faults.fail.empty() || !flags.faults.join.empty() || world < 2 || steps < 4)
    return flags.no_faults ? FaultPlan{} : FaultPlan(flags.faults);
  FaultFlags bare;
  bare.fail.push_back(std::to_string(world - 1) + "@" + std::to_string(3 * steps / 8));
  return FaultPlan(bare);
}

std::string unseen_flip_problem(const FaultPlan& plan, int64_t check_every, int64_t steps) {
  for (const FaultEvent& flip : plan.events()) {
    if (flip.kind != FaultKind::BitFlip) continue;
    const int64_t next_check = std::min(steps, (flip.step / check_every + 1) * check_every);
    for (const FaultEvent& e : plan.events()) {
      if (e.rank != flip.rank || e.step <= flip.step || e.kind == FaultKind::Slow) continue;
      const bool before = e.step < next_check || (e.step == next_check && e.kind == FaultKind::Freeze);
      if (before && e.kind != FaultKind::Join)
        return e.flag + " comes before the checksum round of step " + std::to_string(next_check) + " that finds " +
               flip.flag + ": a flip must be checked before its rank's next fault (" +
               (e.kind == FaultKind::BitFlip ? "a second flip may undo it unseen" : "a rank that is gone cannot be compared") +
               "; lower --check-every or move one)";
      break;  // only the rank's next event matters
    }
  }
  return "";
}

namespace {

void check_zero_flags(const Ch16Flags& f, int world, int64_t steps) {
  if (f.ring || f.apply_before_vote)
    throw CLI::ValidationError(f.ring ? "--ring" : "--apply-before-vote", "not with --zero: its step is its own");
  if (f.keep != "global") throw CLI::ValidationError("--keep", f.keep + ": --zero keeps the global batch");
  const FaultPlan plan = zero_plan_of(f, world, steps);
  const std::string problem = fault_plan_problem(plan, world, steps);
  if (!problem.empty()) throw CLI::ValidationError(problem);
  for (const FaultEvent& e : plan.events())
    if (e.kind != FaultKind::Crash)
      throw CLI::ValidationError(e.kind == FaultKind::Join ? "--join" : "--fail",
                                 e.flag + ": with --zero, plan crashes only (RANK@STEP or RANK@STEP:crash)");
  if (f.shard_mistake == "stale-buddy" && f.shard_recovery == "checkpoint")
    throw CLI::ValidationError("--shard-mistake", "stale-buddy: --shard-recovery checkpoint keeps no buddy copy");
  if (f.shard_recovery == "checkpoint") return;
  std::vector<int> members;  // a shard and its buddy copy die together when two neighbours crash in one step
  for (int r = 0; r < world; ++r) members.push_back(r);
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int> next;
    for (int r : members) if (!plan.at(r, step)) next.push_back(r);
    const int n = int(members.size());
    for (int i = 0; i < n && n > 1; ++i)
      if (plan.at(members[std::size_t(i)], step) && plan.at(members[std::size_t((i + 1) % n)], step))
        throw CLI::ValidationError("--fail", plan.at(members[std::size_t(i)], step)->flag + " and " +
                                   plan.at(members[std::size_t((i + 1) % n)], step)->flag +
                                   ": neighbours crashing in one step take a shard and its only buddy copy; "
                                   "use --shard-recovery checkpoint");
    members = next;
  }
}

}  // namespace

void add_ch16_flags(CLI::App& app, Ch16Flags& f, Options& options) {
  add_fault_flags(app, f.faults);
  app.add_flag("--no-faults", f.no_faults, "Plan no fault (a bare run plans a crash and a join)");
  app.add_option("--keep", f.keep, "On fewer ranks keep the global batch (more per rank) or the per-rank batch "
                                   "(the global batch shrinks, the learning rate with it)")
      ->check(CLI::IsMember({"global", "per-rank"}))->capture_default_str();
  app.add_option("--check-every", f.check_every, "Compare the replicas' parameter checksums every K steps")
      ->check(integer_in(1, 1000000))->capture_default_str();
  app.add_option("--detect-timeout", f.detect_s, "Seconds a call waits on a silent peer, and a quorum on a rank, "
                                                 "before it is counted as failed")
      ->check(number_in(0, 3600))->capture_default_str();
  app.add_flag("--apply-before-vote", f.apply_before_vote,
               "The broken transaction: apply the reduced gradient before every member has agreed");
  app.add_flag("--ring", f.ring, "The step's all-reduce as a ring of sendrecv: a crash lands in its last hop, "
                                 "unannounced, so some members finish the sum and one does not");
  add_goodput_flags(app, f.goodput);
  add_restart_flags(app, f.restart);
  app.add_flag("--zero", f.zero, "ZeRO-1 over the quorum: each member holds 1/n of the momentum, and a crash loses a shard");
  app.add_option("--shard-recovery", f.shard_recovery, "With --zero: how a lost shard comes back (sharded checkpoints, "
                                                        "a buddy copy on the left neighbour, or both runs side by side)")
      ->check(CLI::IsMember({"checkpoint", "buddy", "both"}))->capture_default_str();
  app.add_option("--checkpoint-every", f.checkpoint_every, "With --zero, or --save-checkpoint under mpirun: seal a checkpoint every K steps")
      ->check(integer_in(1, 1000000))->capture_default_str();
  app.add_option("--shard-mistake", f.shard_mistake, "With --zero, a planted bug: a buddy copy one step stale, or the "
                                                      "re-cut shard one float late")
      ->check(CLI::IsMember({"none", "stale-buddy", "off-by-one"}))->capture_default_str();
  app.final_callback([&f, &options, &app] {  // once --ranks, --steps and --optimizer are known
    const std::string comm = app.get_option("--comm")->as<std::string>();
    const bool mpi = comm == "mpi";  // the process count decides
    const CLI::Option* ranks = app.get_option("--ranks");
    const int world = mpi ? detect_process_environment().world : ranks->count() ? ranks->as<int>() : kBareRanks;
    const std::string restart = restart_flags_problem(app, f.restart, f.faults, comm, world, options.steps);
    if (!restart.empty()) throw CLI::ValidationError(restart);  // restart_flags.h
    if (options.optimizer != "momentum")
      throw CLI::ValidationError("--optimizer", options.optimizer + ": chapter 16's step is momentum SGD (the state a "
                                 "joining rank must receive); give momentum or leave it out");
    if (f.no_faults && (!f.faults.fail.empty() || !f.faults.join.empty()))
      throw CLI::ValidationError("--no-faults", "given with --fail or --join: pick one");
    const std::string goodput = goodput_flags_problem(f.goodput, !f.faults.fail.empty() || !f.faults.join.empty() ||
                                                                     f.apply_before_vote || f.ring);
    if (!goodput.empty()) throw CLI::ValidationError(goodput);
    if (f.zero && f.goodput.on) throw CLI::ValidationError("--zero", "given with --goodput: two lessons, run one at a time");
    for (const char* name : {"--shard-recovery", "--checkpoint-every", "--shard-mistake"})
      if (!f.zero && app.get_option(name)->count() && !(mpi && std::string(name) == "--checkpoint-every"))
        throw CLI::ValidationError(name, "only with --zero");
    if (f.zero) return check_zero_flags(f, world, options.steps);
    const FaultPlan plan = mpi ? mpi_plan_of(f.faults, f.no_faults, !f.restart.resume.empty(), world, options.steps) : plan_of(f, world, options.steps);
    const std::string problem = fault_plan_problem(plan, world, options.steps);
    if (!problem.empty()) throw CLI::ValidationError(problem);
    const std::string unseen = unseen_flip_problem(plan, f.check_every, options.steps);
    if (!unseen.empty()) throw CLI::ValidationError(unseen);
  });
}

}  // namespace dpt::ch16
