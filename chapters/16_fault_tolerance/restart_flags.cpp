// restart_flags.cpp — chapter 16's flags under mpirun (restart_flags.h).
#include "restart_flags.h"

#include <algorithm>
#include <string>

namespace dpt::ch16 {

void add_restart_flags(CLI::App& app, RestartFlags& f) {
  app.add_option("--save-checkpoint", f.save_checkpoint,
                 "Under mpirun: seal the run's state (weights, momentum, cursor, ledger, quorum) into DIR every "
                 "--checkpoint-every slots and at the end");
  app.add_option("--resume", f.resume, "Under mpirun: go on from the sealed checkpoint in DIR (DIR/latest) or "
                                       "DIR/step-S, on any number of ranks");
}

FaultPlan mpi_plan_of(const FaultFlags& faults, bool no_faults, bool resuming, int world, int64_t steps) {
  if (no_faults || resuming || !faults.fail.empty() || !faults.join.empty() || world < 2 || steps < 4) {
    FaultFlags fails = faults;
    fails.join.clear();
    return no_faults ? FaultPlan{} : FaultPlan(fails);
  }
  FaultFlags bare;
  bare.fail.push_back(std::to_string(world - 1) + "@" + std::to_string(steps / 4) + ":bitflip");
  return FaultPlan(bare);
}

FaultFlags launch_faults(const FaultFlags& faults, int64_t first) {
  FaultFlags kept;
  kept.join = faults.join;
  for (const std::string& value : faults.fail) {
    const FaultEvent e = parse_fault_event(value, false);
    if (e.step >= first || e.kind == FaultKind::BitFlip) kept.fail.push_back(value);
  }
  return kept;
}

std::vector<FaultEvent> mpi_joins(const FaultFlags& faults) {
  std::vector<FaultEvent> joins;
  for (const std::string& value : faults.join) joins.push_back(parse_fault_event(value, true));
  std::stable_sort(joins.begin(), joins.end(), [](const FaultEvent& a, const FaultEvent& b) { return a.step < b.step; });
  return joins;
}

std::string restart_flags_problem(const CLI::App& app, const RestartFlags& f, const FaultFlags& faults,
                                  const std::string& comm, int world, int64_t steps) {
  if (comm != "threads" && comm != "mpi")
    return "--comm " + comm + ": chapter 16 runs under threads (in place) or mpi (restarts); its step is on the host";
  if (comm == "threads") {
    for (const char* flag : {"--save-checkpoint", "--resume"})
      if (app.get_option(flag)->count())
        return std::string(flag) + ": under mpirun only (--comm mpi): under threads the run keeps going in place "
                                   "and there is nothing to restart";
    return "";
  }
  const std::vector<FaultEvent> joins = mpi_joins(faults);
  for (std::size_t k = 0; k < joins.size(); ++k) {
    const FaultEvent& e = joins[k];
    if (f.save_checkpoint.empty())
      return e.flag + ": under mpirun a join ends the launch with a checkpoint sealed at its step and a relaunch on "
             "one more process goes on from it (TorchElastic's scale-up): give --save-checkpoint DIR";
    if (e.rank != world + int(k))
      return e.flag + ": under mpirun the process that joins is the next rank: " + std::to_string(world + int(k)) +
             (k == 0 ? " on a launch of " + std::to_string(world) + " processes" : " after " + std::to_string(k) +
                                                                                       " earlier join(s)") +
             " (a rank that failed comes back as a new process)";
    if (e.step < 1 || e.step >= steps)
      return e.flag + ": step " + std::to_string(e.step) + ", but a join's step must be from 1 to " +
             std::to_string(steps - 1) + " (at step 0, launch with one more process)";
  }
  for (const char* flag : {"--zero", "--goodput", "--ring", "--apply-before-vote", "--detect-timeout"})
    if (app.get_option(flag)->count())
      return std::string(flag) + ": under threads only: its lesson needs ranks that live on after a peer fails, and "
             "under mpirun a failure ends the launch" +
             (std::string(flag) == "--detect-timeout" ? " (mpirun finds a silent peer with --comm-timeout)" : "");
  if (app.get_option("--checkpoint-every")->count() && f.save_checkpoint.empty())
    return "--checkpoint-every: with --save-checkpoint DIR (under mpirun) or --zero (under threads)";
  return "";
}

}  // namespace dpt::ch16
