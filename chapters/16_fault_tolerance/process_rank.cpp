// process_rank.cpp — one process of a launch under mpirun (process_rank.h).
// A slot, as under threads (elastic_rank.cpp), on the world communicator:
//
//   fault    this slot's planned event for this rank: a crash kills the
//            process, a freeze stops it answering (both end the launch)
//   check    every K slots, and before every seal: compare parameter
//            checksums; roll every process back to the last agreed state if
//            one differs (a corrupted replica is never sealed)
//   step     gradient all-reduce, then commit_step (ch16.h): on all or none
//   seal     every K slots and after the last: the state, the ledger, the quorum;
//            at a --join's step too, and the launch ends there (a relaunch on
//            one more process goes on from it)
#include "process_rank.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ch16.h"
#include "dpt/check.h"
#include "elastic_rank_parts.h"

namespace dpt::ch16 {

namespace {

using parts::RankState;
using parts::Snapshot;

constexpr const char* kProgram = "ch16_fault_tolerance";

class ProcessRank {
 public:
  ProcessRank(Context& ctx, const Options& o, const Dataset& data, const FaultPlan& plan, const ElasticSettings& s,
              const SealSettings& seal, const QuorumDecision& q, RestartState& run)
      : ctx_(ctx), o_(o), data_(data), plan_(plan), s_(s), seal_(seal), q_(q), run_(run),
        st_(parts::fresh_state(o, ctx.device)) {
    parts::set_flat_parameters(st_, run.params);
    st_.momentum = run.momentum;
    st_.committed = run.committed, st_.cursor = run.cursor;
    if (run.slot > 0)  // a sealed state passed the checksum round before its seal
      snap_ = Snapshot{true, parts::member_state(st_, {}, ctx.rank, 0)};
  }

  LaunchOutcome run() {
    const auto t0 = parts::SteadyClock::now();
    const int64_t first = run_.slot;
    for (int64_t slot = first; slot < o_.steps; ++slot) {
      if (slot == seal_.join_at && slot > first) {  // TorchElastic's scale-up: every worker restarts, one more
        seal(slot);
        out_.relaunch_on = ctx_.world + 1;
        out_.seconds = parts::seconds_since(t0);
        return out_;
      }
      const FaultEvent* e = plan_.at(ctx_.rank, slot);
      if (e && e->kind == FaultKind::Crash) kill_this_process(kProgram, ctx_.rank, ctx_.world, *e);
      if (e && e->kind == FaultKind::Freeze) freeze(*e);
      if (e && e->kind == FaultKind::Slow) slow_ = e->factor;
      if (slot % s_.check_every == 0) check(slot);
      if (e && e->kind == FaultKind::BitFlip) parts::flip_a_bit(st_);  // silent: found by a later checksum round
      step(slot);
      if (!seal_.dir.empty() && (slot + 1) % seal_.every == 0 && slot + 1 < o_.steps) seal(slot + 1);
    }
    check(o_.steps);  // a flip in the last slots is found too, before the final seal
    if (!seal_.dir.empty() && run_.slot < o_.steps) seal(o_.steps);
    out_.seconds = parts::seconds_since(t0);
    hand_back(o_.steps);
    return out_;
  }

 private:
  // The process stops answering: it neither sends nor receives again. Its
  // peers' next call waits --comm-timeout, then the MPI backend names it and
  // ends the job. Bounded: if nobody ends it, it ends itself.
  [[noreturn]] void freeze(const FaultEvent& e) {
    const double bound = std::max(60.0, 4 * ctx_.comm.timeout_s() + 30);
    std::fprintf(stderr, "%s: rank %d of %d: %s: this process stops answering at the start of step %lld\n", kProgram,
                 ctx_.rank, ctx_.world, e.flag.c_str(), static_cast<long long>(e.step));
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(bound));
    std::fprintf(stderr, "%s: rank %d: frozen for %.0f s and the job was not ended: exiting\n", kProgram, ctx_.rank, bound);
    std::_Exit(1);
  }

  // Every process's checksum, judged as under threads (checksum_dissenters).
  // All agree: the new last good state. One differs: name it, every process
  // goes back to the last good state.
  void check(int64_t slot) {
    if (slot == checked_) return;  // a seal's round in a slot whose round ran
    checked_ = slot;
    const std::vector<float> flat = parts::flat_parameters(st_);
    const std::vector<uint64_t> sums = ctx_.comm.all_gather(parts::checksum_of(flat));
    bool tie = false;
    const std::vector<int> named = parts::checksum_dissenters(sums, std::vector<bool>(sums.size(), true), tie);
    if (named.empty()) {
      snap_ = Snapshot{true, parts::member_state(st_, {}, ctx_.rank, 0)};
      ++run_.checks;
      return;
    }
    DPT_CHECK(snap_.valid, "rank " << ctx_.rank << ": the checksums disagree at step " << slot
                                   << " and this process has no agreed state to go back to");
    const int64_t back_to = snap_.held.committed, undone = st_.committed - back_to;
    std::vector<float> no_grad;  // this loop keeps no last gradient
    parts::take_member_state(st_, no_grad, snap_.held);  // the process as it was then, whole
    run_.ledger.resize(std::size_t(back_to));
    run_.mismatches.push_back({slot, named, back_to, undone, tie});
  }

  // The transaction, over every process of the launch.
  void step(int64_t slot) {
    const auto t0 = parts::SteadyClock::now();
    const int n = ctx_.world;
    const parts::StepPlan plan = parts::plan_step(o_, s_, st_.cursor, n, data_.size());  // calls your assign_samples
    const float lr = plan.lr;
    const std::vector<int64_t>& batch = plan.batch;
    const std::vector<int64_t>& shard = plan.share.shards[std::size_t(ctx_.rank)];
    bool fine = true;  // this member's own gradient, before the sum
    std::vector<float> grad = parts::member_gradient(st_, data_, shard, int64_t(batch.size()), ctx_.device, fine);
    if (slow_ > 1) std::this_thread::sleep_for(std::chrono::duration<double>((slow_ - 1) * parts::seconds_since(t0)));
    ctx_.comm.all_reduce(grad.data(), int64_t(grad.size()), ReduceOp::Sum);
    Replica replica{parts::flat_parameters(st_), std::move(st_.momentum)};
    const bool committed = commit_step(ctx_.comm, replica, grad, lr, fine);  // your hole (ch16.h)
    parts::set_flat_parameters(st_, replica.params);
    st_.momentum = std::move(replica.momentum);
    if (!committed) {
      out_.dropped.push_back("step " + std::to_string(slot) + ": a member's gradient was not finite: the vote said no");
      return;
    }
    ++st_.committed;
    st_.cursor = plan.share.next_cursor;
    run_.ledger.push_back(LedgerEntry{slot, q_.id, n, lr, batch, q_.members});
  }

  void hand_back(int64_t slot) {
    run_.params = parts::flat_parameters(st_);
    run_.momentum = st_.momentum;
    run_.slot = slot, run_.committed = st_.committed, run_.cursor = st_.cursor;
    run_.quorum = q_;
  }

  void seal(int64_t slot) {
    check(slot);
    hand_back(slot);
    save_restart_checkpoint(ctx_, seal_.dir, run_, o_, s_.keep_global_batch ? "global" : "per-rank");
  }

  Context& ctx_;
  const Options& o_;
  const Dataset& data_;
  const FaultPlan& plan_;
  const ElasticSettings& s_;
  const SealSettings& seal_;
  const QuorumDecision& q_;
  RestartState& run_;
  RankState st_;
  Snapshot snap_;
  LaunchOutcome out_;
  double slow_ = 1;
  int64_t checked_ = -1;
};

}  // namespace

QuorumDecision launch_quorum(Context& ctx, const RestartState& run, Lighthouse::RoundRecord& round) {
  const std::vector<int64_t> committed = ctx.comm.all_gather(run.committed);
  round.slot = run.slot;
  round.asked.clear();
  for (int r = 0; r < ctx.world; ++r) round.asked[r] = committed[std::size_t(r)];
  QuorumDecision last = run.quorum;
  if (last.members.empty())  // a first launch: the run's first ranks, id 0
    for (int r = 0; r < ctx.world; ++r) last.members.push_back(r);
  round.decision = decide_quorum(round.asked, last);  // your hole (ch16.h)
  return round.decision;
}

LaunchOutcome run_process_rank(Context& ctx, const Options& o, const Dataset& data, const FaultPlan& plan,
                               const ElasticSettings& s, const SealSettings& seal, const QuorumDecision& q,
                               RestartState& run) {
  return ProcessRank(ctx, o, data, plan, s, seal, q, run).run();
}

}  // namespace dpt::ch16
