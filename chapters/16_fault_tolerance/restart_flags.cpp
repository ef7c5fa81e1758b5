// restart_flags.cpp — chapter 16's flags under mpirun (restart_flags.h).
#include "restart_flags.h"

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
  if (no_faults || resuming || !faults.fail.empty() || !faults.join.empty() || world < 2 || steps < 4)
    return no_faults ? FaultPlan{} : FaultPlan(faults);
  FaultFlags bare;
  bare.fail.push_back(std::to_string(world - 1) + "@" + std::to_string(steps / 4) + ":bitflip");
  return FaultPlan(bare);
}

std::string restart_flags_problem(const CLI::App& app, const RestartFlags& f, const FaultFlags& faults,
                                  const std::string& comm) {
  if (comm != "threads" && comm != "mpi")
    return "--comm " + comm + ": chapter 16 runs under threads (in place) or mpi (restarts); its step is on the host";
  if (comm == "threads") {
    for (const char* flag : {"--save-checkpoint", "--resume"})
      if (app.get_option(flag)->count())
        return std::string(flag) + ": under mpirun only (--comm mpi): under threads the run keeps going in place "
                                   "and there is nothing to restart";
    return "";
  }
  if (!faults.join.empty())
    return "--join " + faults.join.front() + ": under mpirun a rank joins by a relaunch with one more process and "
           "--resume DIR (as TorchElastic scales up); chapter 16 joins in place under threads (--comm threads)";
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
