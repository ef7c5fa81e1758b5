// commit_probe.cpp — your commit_step judged alone, before the run
// (checks.h): the run's faults are crashes, freezes and flips, none of which
// makes a member say no, so only this probe asks what a "no" does.
#include <algorithm>
#include <cmath>

#include "ch16.h"
#include "checks.h"

namespace dpt::ch16 {

bool add_commit_probe_verdicts(Context& ctx, Verdicts& v) {
  const float lr = 0.5f;
  const Replica start{{1.0f, -2.0f, 0.25f}, {0.5f, 0.0f, -1.0f}};
  const std::vector<float> grad = {0.3f, -0.1f, 2.0f};
  // Every member fine: the step applied once, written out here (v <- 0.9 v + g, w <- w - lr v).
  Replica all_fine = start;
  const bool said_yes = commit_step(ctx.comm, all_fine, grad, lr, true);
  float off = 0;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const float m = 0.9f * start.momentum[i] + grad[i], w = start.params[i] - lr * m;
    off = std::max({off, std::fabs(all_fine.momentum[i] - m), std::fabs(all_fine.params[i] - w)});
  }
  // The last member cannot stand behind the step: nobody applies it.
  const int no = ctx.world - 1;
  Replica one_no = start;
  const bool said_yes_anyway = commit_step(ctx.comm, one_no, grad, lr, ctx.rank != no);
  const bool changed = one_no.params != start.params || one_no.momentum != start.momentum;
  float seen[4] = {said_yes ? 0.0f : 1.0f, off, said_yes_anyway ? 1.0f : 0.0f, changed ? 1.0f : 0.0f};
  ctx.comm.all_reduce(seen, 4, ReduceOp::Sum);  // ranks that said no, Σ error, ranks that said yes, ranks changed
  const bool ok = seen[0] == 0 && seen[1] <= 1e-6f && seen[2] == 0 && seen[3] == 0;
  if (!ctx.is_root()) return ok;
  v.holds("commit_step, every member fine: true on every member, the step applied once on each",
          seen[0] == 0 && seen[1] <= 1e-6f,
          str(seen[0], " of ", ctx.world, " member(s) returned false; replicas off the once-applied step by ", seen[1]));
  v.holds(str("commit_step, rank ", no, " not fine: false on every member, no replica changed"),
          seen[2] == 0 && seen[3] == 0,
          str(seen[2], " of ", ctx.world, " member(s) returned true, ", seen[3],
              " changed their replica: a step one member cannot stand behind must be dropped by all"));
  return ok;
}

}  // namespace dpt::ch16
