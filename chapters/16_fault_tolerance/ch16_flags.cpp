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
  app.final_callback([&f, &options, &app] {  // once --ranks, --steps and --optimizer are known
    const std::string comm = app.get_option("--comm")->as<std::string>();
    if (comm != "threads")
      throw CLI::ValidationError("--comm", comm + ": chapter 16 keeps a run going with rank threads only; under "
                                 "mpirun a dead process ends the job (Open MPI has no ULFM): scripts/dptrun restarts it");
    if (options.optimizer != "momentum")
      throw CLI::ValidationError("--optimizer", options.optimizer + ": chapter 16's step is momentum SGD (the state a "
                                 "joining rank must receive); give momentum or leave it out");
    if (f.no_faults && (!f.faults.fail.empty() || !f.faults.join.empty()))
      throw CLI::ValidationError("--no-faults", "given with --fail or --join: pick one");
    const std::string goodput = goodput_flags_problem(f.goodput, !f.faults.fail.empty() || !f.faults.join.empty() ||
                                                                     f.apply_before_vote || f.ring);
    if (!goodput.empty()) throw CLI::ValidationError(goodput);
    const CLI::Option* ranks = app.get_option("--ranks");
    const int world = ranks->count() ? ranks->as<int>() : kBareRanks;
    const FaultPlan plan = plan_of(f, world, options.steps);
    const std::string problem = fault_plan_problem(plan, world, options.steps);
    if (!problem.empty()) throw CLI::ValidationError(problem);
    const std::string unseen = unseen_flip_problem(plan, f.check_every, options.steps);
    if (!unseen.empty()) throw CLI::ValidationError(unseen);
  });
}

}  // namespace dpt::ch16
