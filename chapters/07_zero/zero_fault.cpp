// zero_fault.cpp — --fail under mpirun (the flag check and the kill) and the
// batch a step draws past --skip-batch (zero_fault.h).
#include "zero_fault.h"

#include <algorithm>

namespace dpt::ch07 {

std::string zero_fault_problem(const FaultFlags& faults, const std::string& comm, int world, int64_t steps) {
  if (!faults.join.empty())
    return "--join " + faults.join.front() + ": ch07 cannot add a rank to a running mpirun job (a relaunch " +
           "with more ranks and --resume can; chapter 16 joins under threads)";
  const FaultPlan plan(faults);
  for (const FaultEvent& e : plan.events())
    if (e.kind != FaultKind::Crash)
      return e.flag + ": under mpirun only crash (a process killed for real); " + fault_kind_name(e.kind) +
             " is chapter 16's, under threads";
  if (!plan.empty() && comm != "mpi")
    return plan.events().front().flag + ": ch07 kills a rank only under mpirun (--comm mpi), where a rank is a " +
           "process that can die alone; under threads the process is every rank";
  return fault_plan_problem(plan, world, steps);
}

std::function<void(int64_t step)> planned_crash(const Context& ctx, const FaultFlags& faults) {
  const FaultPlan plan(faults);
  if (plan.empty()) return nullptr;
  const int rank = ctx.rank, world = ctx.world;
  return [plan, rank, world](int64_t step) {
    const FaultEvent* e = plan.at(rank, step);
    if (e == nullptr || e->kind != FaultKind::Crash) return;
    kill_this_process("ch07_zero", rank, world, *e);  // the line scripts/dptrun reads, then SIGKILL
  };
}

int64_t batch_of_step(int64_t step, std::vector<int64_t> skipped) {
  std::sort(skipped.begin(), skipped.end());
  skipped.erase(std::unique(skipped.begin(), skipped.end()), skipped.end());
  int64_t batch = step;
  for (int64_t b : skipped)  // ascending: each skipped batch at or before the cursor moves it on by one
    if (b <= batch) ++batch;
  return batch;
}

}  // namespace dpt::ch07
