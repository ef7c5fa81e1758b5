// zero_lesson.cpp — chapter 16's --zero lesson (zero_lesson.h).
#include "zero_lesson.h"

#include <filesystem>
#include <memory>
#include <random>
#include <system_error>

#include "checks.h"
#include "dpt/holes.h"
#include "dpt/sharded_checkpoint.h"
#include "zero_checks.h"
#include "zero_rank.h"

namespace dpt::ch16 {

namespace {

/// One row of the side-by-side table.
struct ZeroRow {
  std::string policy, memory_formula, memory_held, upkeep, recovery, lost, recompute;
};

// A fresh scratch directory for the checkpoints (removed after the run).
std::string zero_scratch_dir() {
  namespace fs = std::filesystem;
  std::random_device entropy;
  for (int tries = 0; tries < 100; ++tries) {
    const fs::path dir = fs::temp_directory_path() / ("dpt-ch16-zero-" + std::to_string(entropy()));
    if (fs::create_directory(dir)) return dir.string();
  }
  throw Error("could not make a scratch directory for --zero's checkpoints under " +
              fs::temp_directory_path().string());
}

ZeroRow zero_row(const ZeroSettings& s, const ZeroRecord& rec, int64_t psi, int world, int64_t steps) {
  ZeroRow row;
  row.policy = s.buddy ? "buddy" : str("checkpoint every ", s.checkpoint_every);
  int n = 0;
  int64_t held = 0;
  for (std::size_t r = 0; r < rec.finals.size(); ++r)
    if (!rec.finals[r].empty()) ++n, held = std::max(held, rec.buddy_bytes[r]);
  auto buddy_bytes = [psi](int members) { return members > 1 ? 4 * shard_size(psi, members) : int64_t(0); };
  row.memory_formula = s.buddy ? str("4·ceil(Ψ/n) = ", buddy_bytes(world), " B on ", world, ", ", buddy_bytes(n),
                                     " B on ", n)
                               : str("0 B; disk 4·3·S per save");
  row.memory_held = s.buddy ? str(held, " B") : "0 B";
  double seconds = 0;
  int64_t lost = 0;
  for (const ZeroRecovery& r : rec.recoveries) seconds += r.seconds, lost += r.committed_before - r.restored;
  const double per_step = rec.steps_timed ? rec.step_seconds / double(rec.steps_timed) : 0;
  row.upkeep = str(fixed(1e3 * rec.upkeep_seconds, 2), " ms", s.buddy ? "" : str(" (", rec.checkpoints, " saves)"));
  row.recovery = str(fixed(1e3 * seconds, 2), " ms");
  row.lost = str(lost, " of ", steps);
  row.recompute = str(fixed(1e3 * per_step * double(lost), 2), " ms");
  return row;
}

}  // namespace

ZeroShared::~ZeroShared() {
  std::error_code ignored;  // a destructor must not throw: what cannot be removed stays
  if (!settings.dir.empty()) std::filesystem::remove_all(settings.dir, ignored);
}

void zero_lesson(Lecture& lec, const Ch16Flags& f, ZeroShared& shared) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  if (o.steps == 0) return;
  const FaultPlan plan = zero_plan_of(f, ctx.world, o.steps);
  const int64_t psi = build_model(o, Device::host()).num_parameters();
  std::vector<std::string> policies = {f.shard_recovery};
  if (f.shard_recovery == "both") policies = {"checkpoint", "buddy"};
  if (ctx.is_root()) {
    say.section(str("1. ZeRO-1 on ", ctx.world, " ranks: each holds 1/n of the momentum (Ψ = ", psi, ", ",
                    4 * shard_size(psi, ctx.world), " B each)"));
    for (const FaultEvent& e : plan.events()) say.say("  planned: " + e.flag + " (its shard dies with it)");
    say.say("  checkpoint: every K committed steps the quorum seals a sharded checkpoint; after a crash the\n"
            "  survivors load it re-sharded N → M and go back to its step (the steps since are recomputed).\n"
            "  buddy: every step each member sends its new shard to its left neighbour before the vote; after\n"
            "  a crash the dead rank's shard is its buddy's copy, and the survivors re-cut the momentum for M.\n"
            "  every step ends in commit_step on each member's shard: the vote, and every shard applied or none.");
  }
  // Every step's vote and commit is your commit_step, on each member's shard: judged alone first, and
  // the runs wait for it to be written.
  Holes holes;
  if (!holes.run(ctx.comm, [&] { add_commit_probe_verdicts(ctx, lec.verdicts); })) {
    if (!ctx.is_root()) return;
    say.say("  commit_step: not written yet (" + holes.last() + "): every --zero step ends in it");
    return holes.judge(lec.verdicts);
  }
  std::vector<ZeroRow> rows;
  for (const std::string& policy : policies) {
    if (ctx.is_root()) {
      shared.settings = ZeroSettings{ctx.world, policy == "buddy", f.checkpoint_every, "", f.shard_mistake};
      if (policy == "checkpoint") shared.settings.dir = zero_scratch_dir();
      std::vector<int> all;
      for (int r = 0; r < ctx.world; ++r) all.push_back(r);
      shared.lighthouse = std::make_unique<Lighthouse>(ctx.world, all, f.detect_s, f.detect_s);
      shared.record = std::make_unique<ZeroRecord>();
      ZeroRecord& rec = *shared.record;
      rec.finals.resize(std::size_t(ctx.world));
      rec.shards.resize(std::size_t(ctx.world));
      rec.index.assign(std::size_t(ctx.world), -1);
      rec.buddy_bytes.assign(std::size_t(ctx.world), 0);
      rec.buddy_sent.assign(std::size_t(ctx.world), 0);
    }
    ctx.comm.barrier();  // the launch's world: never revoked
    run_zero_rank(ctx.rank, ctx.device, o, lec.data, plan, shared.settings, *shared.lighthouse, *shared.record);
    ctx.comm.barrier();
    if (!ctx.is_root()) continue;
    ZeroRecord& rec = *shared.record;
    say.section("2. --shard-recovery " + policy);
    for (const std::string& line : shared.lighthouse->history()) say.say("  " + line);
    for (const ZeroRecovery& r : rec.recoveries)
      say.say(str("  step ", r.slot, ": ", r.from, " → ", r.to, " members, ", r.committed_before,
                  " committed steps held, ", r.restored, " after the recovery (", fixed(1e3 * r.seconds, 2), " ms)"));
    add_zero_verdicts(lec.verdicts, o, lec.data, plan, shared.settings, rec);
    rows.push_back(zero_row(shared.settings, rec, psi, ctx.world, o.steps));
    if (!shared.settings.dir.empty()) std::filesystem::remove_all(shared.settings.dir);
    shared.settings.dir.clear();
  }
  if (!ctx.is_root()) return;
  say.section("3. Memory vs recovery time, measured (the chapter's design question)");
  Table table("--zero: a lost shard, two ways back", {"policy", "extra memory per rank (formula)", "held", "keeping it, all steps",
                                                            "recovery", "steps lost", "recomputing them"});
  for (const ZeroRow& r : rows) table.add_row({r.policy, r.memory_formula, r.memory_held, r.upkeep, r.recovery, r.lost, r.recompute});
  say.say(table.str());
  say.say("  S = ceil(Ψ/n) floats, one member's shard; a save writes parameters and two moment slots (momentum,\n"
          "  zeros) per rank and fsyncs them: that, not the bytes, is most of what keeping a checkpoint costs here.");
}

}  // namespace dpt::ch16
