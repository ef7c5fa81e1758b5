// checks.cpp — chapter 16's verdicts (checks.h). Each expected value comes
// from the plan or an oracle, never from the quantity it judges.
#include "checks.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "dpt/data_parallel.h"
#include "replay.h"

namespace dpt::ch16 {

namespace {
// A disagreement names `rank`: alone, or among every voter when there was no majority.
bool names(const MismatchEntry& m, int rank) {
  if (m.tie) return std::count(m.named.begin(), m.named.end(), rank) > 0;
  return m.named == std::vector<int>{rank};
}

// Each rank healed at a slot whose step it then committed, and healed again
// at the next slot: a healed member holds the quorum's step, so it cannot be
// behind again without leaving. "" when none.
std::string reheals_text(const RunRecord& record) {
  std::map<int, std::vector<int64_t>> again;  // by rank: the slots of its heals again
  for (const HealEntry& h : record.heals) {
    bool committed = false;
    for (const LedgerEntry& e : record.ledger)
      committed = committed || (e.slot == h.slot && std::count(e.ranks.begin(), e.ranks.end(), h.joiner) > 0);
    if (!committed) continue;
    for (const HealEntry& next : record.heals)
      if (next.joiner == h.joiner && next.slot == h.slot + 1) again[h.joiner].push_back(next.slot);
  }
  std::string text;
  for (auto& [rank, slots] : again) {
    std::sort(slots.begin(), slots.end());
    std::string list;
    for (std::size_t i = 0; i < slots.size() && i < 6; ++i) list += (i ? ", " : "") + std::to_string(slots[i]);
    if (slots.size() > 6) list += ", … (" + std::to_string(slots.size()) + " in all)";
    text += (text.empty() ? "" : "; ") + str("rank ", rank, " healed again at step(s) ", list,
                                             ", each right after a heal and a step it committed: healed, it was still behind");
  }
  return text;
}

}  // namespace

bool final_model(const Options& o, const RunRecord& record, MLP& model) {
  for (const std::vector<float>& w : record.finals) {
    if (w.empty()) continue;
    model = build_model(o, Device::host());
    std::size_t at = 0;
    for (Tensor& p : model.parameters()) {
      std::copy(w.begin() + std::ptrdiff_t(at), w.begin() + std::ptrdiff_t(at + std::size_t(p.numel())), p.data());
      at += std::size_t(p.numel());
    }
    return true;
  }
  return false;
}

void add_ch16_verdicts(Verdicts& v, Table& summary, const Options& o, const Dataset& data, const FaultPlan& plan,
                       const ElasticSettings& s, RunRecord& record) {
  // Who finished, against who the plan leaves in at the last step.
  std::vector<int> finished, planned;
  for (int r = 0; r < s.world; ++r) {
    if (!record.finals[std::size_t(r)].empty()) finished.push_back(r);
    if (plan.in_run(r, o.steps - 1)) planned.push_back(r);
  }
  const bool freezes = std::any_of(plan.events().begin(), plan.events().end(),
                                   [](const FaultEvent& e) { return e.kind == FaultKind::Freeze; });
  v.holds("the run finished on the plan's ranks", finished == planned,
          "finished " + rank_set_text(finished) + ", the plan leaves " + rank_set_text(planned) + " in at the last step");
  if (finished.empty()) return;
  const std::vector<float>& first = record.finals[std::size_t(finished.front())];

  // 1. Replicas identical: the same committed steps, bit for bit.
  double spread = 0;
  for (int r : finished) spread = std::max(spread, max_abs_difference(record.finals[std::size_t(r)], first));
  if (finished.size() > 1)
    v.at_most("replicas identical: max |w_r - w_" + std::to_string(finished.front()) + "|", spread, 0,
              "every member applies the same reduced gradient, or none does");
  else
    v.cannot_fail("replicas identical", "with one rank left (try --ranks 4)");

  // 2. The run equals one device replaying the ledger.
  const double gap = max_abs_difference(first, replay_ledger(o, data, record.ledger));
  v.at_most("the run = one device replaying the ledger's " + std::to_string(record.ledger.size()) + " steps",
            gap, kSingleDeviceTolerance,
            gap <= kSingleDeviceTolerance ? "float sums in another order"
                                          : "the weights hold what the ledger does not: a step applied but not committed "
                                            "(commit_step), or a member healed to other than its source (heal)?");

  // 3. Every sample of every epoch exactly once.
  std::vector<LedgerEntry> computed = record.ledger;  // each step's samples as its members drew them
  for (LedgerEntry& e : computed) {
    const auto drawn = record.drawn.find(e.slot);
    if (drawn == record.drawn.end()) continue;  // mpirun: one process's view is all there is
    e.samples.clear();
    for (const std::vector<int64_t>& shard : drawn->second) e.samples.insert(e.samples.end(), shard.begin(), shard.end());
  }
  const ExactlyOnce once = check_exactly_once(computed, data.size());
  v.holds("the ledger consumed every sample of every epoch exactly once", once.ok, once.seen);

  // 4. Heals: each as many bytes as the same heal alone (the probe judges
  // that those are the least), none through a collective, the joiner's
  // weights the source's, and one heal each time a rank comes back.
  std::map<std::size_t, int64_t> alone;  // by Ψ: your heal on a private pair
  for (const HealEntry& h : record.heals) {
    const std::string who = "heal of rank " + std::to_string(h.joiner) + " at step " + std::to_string(h.slot);
    if (!alone.count(h.sent.size())) alone[h.sent.size()] = heal_bytes_alone(int64_t(h.sent.size()));
    const int64_t want = alone[h.sent.size()];
    v.holds(who + ": the bytes of the same heal alone, none through a collective",
            h.collective == 0 && h.bytes > 0 && h.bytes == want,
            h.collective > 0 ? std::to_string(h.collective) + " B reached it through a collective: a collective reaches "
                                   "every member of the group, in step or not"
                             : std::to_string(h.bytes) + " B sent to it, " + std::to_string(want) +
                                   " B alone on a pair" + (h.bytes == 0 ? ": it received nothing" : ""));
    v.at_most(who + ": max |w_joiner - w_source|", h.received.size() == h.sent.size() && !h.sent.empty()
                                                       ? max_abs_difference(h.received, h.sent) : std::nan(""), 0,
              "a copy, not a computation");
    summary.add_row({who, format_bytes(double(h.bytes + h.collective)) + " in " + fixed(1e3 * h.seconds, 2) + " ms"});
  }
  const std::string reheals = reheals_text(record);
  if (record.heals.empty())
    v.cannot_fail("a rank heals once each time it comes back", "with no rank behind in this run (try --fail 3@3 --join 3@8)");
  else
    v.holds("a rank heals once each time it comes back", reheals.empty(),
            reheals.empty() ? std::to_string(record.heals.size()) + " heal(s), none of a rank just healed" : reheals);
  // 5. Bit flips: found, and the flipped rank named (the plan says which).
  for (const FaultEvent& e : plan.events()) {
    if (e.kind != FaultKind::BitFlip) continue;
    bool named = false;
    for (const MismatchEntry& m : record.mismatches)
      named = named || (m.slot >= e.step && names(m, e.rank));
    v.holds("the bit flip of " + e.flag + " found by a checksum, rank " + std::to_string(e.rank) + " named", named,
            std::to_string(record.mismatches.size()) + " checksum round(s) disagreed");
  }
  // 6. Every checksum disagreement is a planned bit flip: replicas that part
  // for any other reason (a step half applied) are a fault of the run.
  int unplanned = 0;
  std::string first_unplanned, unplanned_heal;
  for (const MismatchEntry& m : record.mismatches) {
    bool planned_flip = false;
    for (const FaultEvent& e : plan.events())
      planned_flip = planned_flip || (e.kind == FaultKind::BitFlip && e.step <= m.slot && names(m, e.rank));
    if (planned_flip || unplanned++ > 0) continue;
    first_unplanned = "step " + std::to_string(m.slot) + ": ranks " + rank_set_text(m.named) + " differ from the majority";
    for (const HealEntry& h : record.heals)  // a named rank healed before it: the heal is a suspect too
      if (h.slot <= m.slot && std::count(m.named.begin(), m.named.end(), h.joiner))
        unplanned_heal = "rank " + std::to_string(h.joiner) + " healed at step " + std::to_string(h.slot);
  }
  v.holds("replicas parted only where a bit flip was planned", unplanned == 0,
          unplanned == 0 ? std::to_string(record.mismatches.size()) + " disagreement(s), each a planned flip"
                         : first_unplanned + " with no bit flip planned: a step applied on some members only "
                                             "(commit_step)?" + (unplanned_heal.empty() ? "" : " " + unplanned_heal +
                                             ": did the heal leave it other than its source (heal)?"));
  for (const MismatchEntry& m : record.mismatches)
    summary.add_row({"checksums disagree at step " + std::to_string(m.slot),
                     (m.tie ? "no majority, all named " : "named ") + rank_set_text(m.named) + ", " + std::to_string(m.steps_undone) + " steps rolled back"});
  for (const std::string& d : record.dropped) summary.add_row({"dropped", d.substr(0, 110)});
  // 7. Where the slots went: each committed, dropped, or undone by a rollback,
  // and only a crash or a freeze (one slot each) drops one.
  int64_t undone = 0, failures = 0;
  for (const MismatchEntry& m : record.mismatches) undone += m.steps_undone;
  for (const FaultEvent& e : plan.events()) failures += e.kind == FaultKind::Crash || e.kind == FaultKind::Freeze;
  const int64_t committed = int64_t(record.ledger.size()), dropped = int64_t(record.dropped.size());
  v.holds("every slot committed, dropped, or undone by a rollback", committed + dropped + undone == o.steps,
          std::to_string(committed) + " + " + std::to_string(dropped) + " + " + std::to_string(undone) + " of " +
              std::to_string(o.steps) + " slots");
  v.at_most("slots dropped, at most one per planned crash or freeze", double(dropped), double(failures),
            dropped <= failures ? "the survivors go on from the next slot"
                                : "a slot was dropped with no failure planned: does the step ever commit?");
  summary.add_row({"steps committed / slots", std::to_string(record.ledger.size()) + " / " + std::to_string(o.steps)});
  summary.add_row({"checksum rounds that agreed", std::to_string(record.checks)});
  if (freezes) summary.add_row({"a freeze costs", "one --detect-timeout in the step's call, one in the next quorum's wait"});
}

}  // namespace dpt::ch16
