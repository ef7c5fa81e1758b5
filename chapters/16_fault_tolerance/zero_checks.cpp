// zero_checks.cpp — the --zero run's verdicts (zero_checks.h). Expected values
// come from the plan, the flags and an oracle, never from what they judge.
#include "zero_checks.h"

#include <algorithm>
#include <cmath>

#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/sharded_checkpoint.h"
#include "replay.h"

namespace dpt::ch16 {

void replay_with_momentum(const Options& o, const Dataset& data, const std::vector<LedgerEntry>& ledger,
                          std::vector<float>& params, std::vector<float>& momentum) {
  MLP model = build_model(o, Device::host());
  std::vector<Tensor> ps = model.parameters();
  momentum.assign(std::size_t(model.num_parameters()), 0.0f);
  for (const LedgerEntry& entry : ledger) {
    for (Tensor& p : ps) p.zero_grad();
    Batch batch = gather_batch(data, entry.samples, Device::host());
    softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
    std::size_t at = 0;
    for (Tensor& p : ps) {
      const std::vector<float> g = p.grad().to_vector();
      float* w = p.data();
      for (std::size_t k = 0; k < g.size(); ++k, ++at) {
        momentum[at] = 0.9f * momentum[at] + g[k];
        w[k] -= entry.lr * momentum[at];
      }
    }
  }
  params.clear();
  for (const Tensor& p : ps) {
    const std::vector<float> v = p.to_vector();
    params.insert(params.end(), v.begin(), v.end());
  }
}

std::vector<float> zero_gather_momentum(const ZeroRecord& record, int64_t psi) {
  int n = 0;
  for (std::size_t r = 0; r < record.finals.size(); ++r) n += record.finals[r].empty() ? 0 : 1;
  if (n == 0) return {};
  const int64_t S = shard_size(psi, n);
  std::vector<float> full(std::size_t(psi), 0.0f);
  std::vector<bool> covered(std::size_t(n), false);
  for (std::size_t r = 0; r < record.finals.size(); ++r) {
    if (record.finals[r].empty()) continue;
    const int i = record.index[r];
    if (i < 0 || i >= n || int64_t(record.shards[r].size()) != S) return {};
    covered[std::size_t(i)] = true;
    for (int64_t k = 0; k < S && i * S + k < psi; ++k) full[std::size_t(i * S + k)] = record.shards[r][std::size_t(k)];
  }
  if (std::count(covered.begin(), covered.end(), false) > 0) return {};
  return full;
}

void add_zero_verdicts(Verdicts& v, const Options& o, const Dataset& data, const FaultPlan& plan,
                       const ZeroSettings& s, ZeroRecord& record) {
  const std::string tag = s.buddy ? "[buddy] " : "[checkpoint] ";
  std::vector<int> finished, planned;
  for (int r = 0; r < s.world; ++r) {
    if (!record.finals[std::size_t(r)].empty()) finished.push_back(r);
    if (plan.in_run(r, o.steps - 1)) planned.push_back(r);
  }
  v.holds(tag + "the run finished on the plan's ranks", finished == planned,
          std::to_string(finished.size()) + " finished, the plan leaves " + std::to_string(planned.size()));
  if (finished.empty()) return;
  const std::vector<float>& first = record.finals[std::size_t(finished.front())];
  double spread = 0;
  for (int r : finished) spread = std::max(spread, max_abs_difference(record.finals[std::size_t(r)], first));
  if (finished.size() > 1)
    v.at_most(tag + "replicas identical: max |w_r - w_first|", spread, 0, "the all-gather gives every member the same");
  else
    v.cannot_fail(tag + "replicas identical", "with one rank left (try --ranks 4)");

  std::vector<float> oracle_w, oracle_v;
  replay_with_momentum(o, data, record.ledger, oracle_w, oracle_v);
  const double gap = max_abs_difference(first, replay_ledger(o, data, record.ledger));
  v.at_most(tag + "the run = one device replaying the ledger's " + std::to_string(record.ledger.size()) + " steps",
            gap, kSingleDeviceTolerance,
            gap <= kSingleDeviceTolerance ? "float sums in another order" : "the weights went on from a wrong momentum");
  const std::vector<float> momentum = zero_gather_momentum(record, int64_t(first.size()));
  const double mgap = momentum.empty() ? std::nan("") : max_abs_difference(momentum, oracle_v);
  v.at_most(tag + "momentum gathered from the shards = the replay's", mgap, kSingleDeviceTolerance,
            momentum.empty() ? "some shard has no finisher holding it"
            : mgap <= kSingleDeviceTolerance ? "the lost shard came back whole"
                                             : "a shard came back wrong: a stale copy, or cut at the wrong place?");
  const ExactlyOnce once = check_exactly_once(record.ledger, data.size());
  v.holds(tag + "the ledger consumed every sample of every epoch exactly once", once.ok, once.seen);

  int64_t lost = 0;
  if (record.recoveries.empty())
    v.cannot_fail(tag + "a lost shard recovered", "with no crash planned (try --fail 2@7)");
  for (const ZeroRecovery& r : record.recoveries) {
    const int64_t expect = s.buddy ? r.committed_before : r.committed_before / s.checkpoint_every * s.checkpoint_every;
    lost += r.committed_before - r.restored;
    v.holds(tag + "recovery at step " + std::to_string(r.slot) +
                (s.buddy ? ": nothing lost" : ": back to the last sealed checkpoint"),
            r.restored == expect,
            "restored " + std::to_string(r.restored) + " committed steps of " + std::to_string(r.committed_before) +
                (s.buddy ? "" : ", checkpoints every " + std::to_string(s.checkpoint_every)));
  }
  if (s.buddy)
    for (int r : finished) {
      const int64_t formula = planned.size() > 1 ? 4 * shard_size(int64_t(first.size()), int(planned.size())) : 0;
      v.holds(tag + "rank " + std::to_string(r) + "'s buddy copy: bytes = 4·ceil(Ψ/n) (0 alone)",
              record.buddy_bytes[std::size_t(r)] == formula,
              std::to_string(record.buddy_bytes[std::size_t(r)]) + " B held, formula " + std::to_string(formula) + " B");
      v.holds(tag + "rank " + std::to_string(r) + "'s last refresh sent the same bytes (traffic log)",
              record.buddy_sent[std::size_t(r)] == formula,
              std::to_string(record.buddy_sent[std::size_t(r)]) + " B sent to its left neighbour, formula " +
                  std::to_string(formula) + " B");
    }
  const int64_t committed = int64_t(record.ledger.size()), dropped = int64_t(record.dropped.size());
  v.holds(tag + "every slot committed, dropped, or lost to a rollback", committed + dropped + lost == o.steps,
          std::to_string(committed) + " + " + std::to_string(dropped) + " + " + std::to_string(lost) + " of " +
              std::to_string(o.steps) + " slots");
}

}  // namespace dpt::ch16
