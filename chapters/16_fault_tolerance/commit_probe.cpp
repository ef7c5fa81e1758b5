// commit_probe.cpp — your commit_step judged alone, before the run
// (checks.h): the run's faults are crashes, freezes and flips, none of which
// makes a member say no, so only this probe asks what a "no" does; and, on a
// private group of three, what a member that never comes does to the others.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <string>
#include <thread>

#include "ch16.h"
#include "checks.h"
#include "dpt/quorum_group.h"

namespace dpt::ch16 {

namespace {

// Three members; member 2 crashes before commit_step (its group is revoked,
// as the run's lighthouse does). What the other two saw: "" when each got the
// group's exception (PeerFailed or Timeout) with its replica as it was.
std::string commit_probe_crash(const Replica& start, const std::vector<float>& grad, float lr) {
  const int n = 3, gone = 2;
  auto group = make_threads_group(n, 5.0);
  std::vector<Replica> replicas(n, start);
  std::vector<std::string> saw(n);
  std::vector<std::thread> members;
  for (int m = 0; m < n; ++m)
    members.emplace_back([&, m] {
      const std::size_t i = std::size_t(m);
      if (m == gone) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        revoke(*group[i], "member 2 crashed");
        return;
      }
      try {
        saw[i] = commit_step(*group[i], replicas[i], grad, lr, true) ? "returned true" : "returned false";
      } catch (const PeerFailed&) {
      } catch (const Timeout&) {
      } catch (const std::exception& e) {
        saw[i] = str("threw another error (", std::string(e.what()).substr(0, 80), ")");
      }
    });
  for (std::thread& t : members) t.join();
  for (int m = 0; m < n; ++m) {
    const std::size_t i = std::size_t(m);
    if (m == gone) continue;
    const bool changed = replicas[i].params != start.params || replicas[i].momentum != start.momentum;
    if (!saw[i].empty() || changed)
      return str("member ", m, " ", saw[i].empty() ? "let the group's exception through" : saw[i],
                 changed ? " with its replica changed" : " with its replica as it was");
  }
  return "";
}

}  // namespace

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
  const std::string crash = commit_probe_crash(start, grad, lr);
  v.holds("commit_step, every member fine: true on every member, the step applied once on each",
          seen[0] == 0 && seen[1] <= 1e-6f,
          str(seen[0], " of ", ctx.world, " member(s) returned false; replicas off the once-applied step by ", seen[1]));
  v.holds(str("commit_step, rank ", no, " not fine: false on every member, no replica changed"),
          seen[2] == 0 && seen[3] == 0,
          str(seen[2], " of ", ctx.world, " member(s) returned true, ", seen[3],
              " changed their replica: a step one member cannot stand behind must be dropped by all"));
  v.holds("commit_step, a member crashed before it: the group's exception passed through on the others, no replica "
          "changed", crash.empty(),
          crash.empty() ? "2 of 2 let it through, each replica as it was"
                        : crash + ": a step a member never reached is applied by none, and the others hear of it");
  return ok && crash.empty();
}

}  // namespace dpt::ch16
