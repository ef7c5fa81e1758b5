// chapters/03_naive_dp/checks.cpp — chapter 03's summary rows and verdicts
// (checks.h): each judged from what the run measured, against what ch03.h's
// contracts and the model's size say it must be.
#include "checks.h"

#include <numeric>

#include "ch03.h"
#include "dpt/check.h"

namespace dpt::ch03 {

void add_summary_rows(Table& summary, const Context& ctx, const Options& o, const DataParallelRun& run) {
  summary.add_row({"ranks x batch per rank", str(ctx.world, " x ", o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"time (compute / communication)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                      " / " + fixed(run.sync_seconds, 2) + " s on rank 0)"});
  summary.add_row({"bytes moved per step", format_bytes(run.bytes_per_step())});
}

namespace {
// shard_indices on N·M + 1 samples over N ranks (N the run's ranks, at least
// 2: the hole is a plain function, so this does not need the run's shape).
// "" when it throws dpt::Error naming both numbers; else what it did.
std::string refuses_uneven_batch(int world, int64_t batch) {
  const int n = std::max(2, world);
  const int64_t total = int64_t(n) * batch + 1;
  std::vector<int64_t> global(static_cast<std::size_t>(total));
  std::iota(global.begin(), global.end(), int64_t(0));
  try {
    int64_t handed_out = 0;
    for (int r = 0; r < n; ++r) handed_out += int64_t(shard_indices(global, r, n).size());
    return str("it returned shards holding ", handed_out, " of the ", total, " samples; the contract asks for an "
               "error (a step that drops or repeats a sample is no longer one device's step)");
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find(std::to_string(total)) == std::string::npos || message.find(std::to_string(n)) == std::string::npos)
      return str("the error must say both numbers (", total, " and ", n, "); it said: ", message);
    return "";
  }
}
}  // namespace

void add_verdicts(Verdicts& v, const Context& ctx, const Options& o, const DataParallelRun& run, const Measured& m) {
  v.holds("the loss stayed finite", run.diverged_step < 0,
          run.diverged_step < 0 ? "" : "it was " + fmt(run.losses.back(), 3) + " at step " +
                                           std::to_string(run.diverged_step) + "; is the average finite?");
  const std::string uneven = refuses_uneven_batch(ctx.world, o.batch);
  v.holds(str("shard_indices refuses ", std::max(2, ctx.world), " x ", o.batch, " + 1 samples over ",
              std::max(2, ctx.world), " ranks"),
          uneven.empty(), uneven.empty() ? "a dpt::Error naming both numbers, as ch03.h asks" : uneven);
  if (ctx.world == 1) {  // one replica is its own master, its own mean; the host sends nothing
    v.cannot_fail("replicas identical before step 0 and after training", on_one_rank(4));
    v.cannot_fail("host traffic per step = 2(N-1)S", on_one_rank(4));
    return;
  }
  v.at_most("replicas identical before step 0: max |w_r - w_0|", m.start_spread, 0,
            m.start_spread == 0 ? "every replica holds the master copy's bits"
                                : "some replica kept a start of its own: did the master copy reach every rank?");
  v.at_most("replicas identical: max |w_r - w_0|", m.spread, 0,
            m.spread == 0 || m.start_spread != 0 ? "every rank applies the same averaged gradient to the same start"
                                                 : "they started equal and drifted: did every rank apply the same bits?");
  const double measured = run.bytes_per_step(), needed = 2.0 * (ctx.world - 1) * m.gradient_bytes;  // from S
  v.near("host traffic per step (bytes)", measured, needed, 0,
         measured == needed ? "2(N-1)S exactly, what the average needs; the model's size sets it, not the run"
         : measured > needed ? "more than the average needs (from the model's size): which bytes did the mean not need?"
                             : "less than the average needs: did every gradient reach rank 0, and the mean every rank, "
                               "by send and recv (the hole's; a library collective moves its bytes its own way)?");
}

}  // namespace dpt::ch03
