// zero_rank.cpp — one rank of chapter 16's --zero run (zero_rank.h). A slot:
//
//   quorum   ask the lighthouse who trains; fewer members than last time:
//            recover the momentum (checkpoint or buddies), re-cut for n
//   step     gradient all-reduce; prepare my shard's update, my buddy's copy
//            and every member's new parameters (an all-gather); then the
//            student's commit_step (ch16.h) on my shard: the vote, and my
//            shard applied on all or none
//
// Everything before the vote only prepares: a crash anywhere before it drops
// the slot on every survivor with nothing changed. A planned crash comes
// after the prepare, so the survivors meet it in commit_step's vote.
#include "zero_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "ch16.h"
#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/quorum_group.h"
#include "dpt/sharded_checkpoint.h"
#include "elastic_rank.h"

namespace dpt::ch16 {

std::vector<float> zero_shard_of(const std::vector<float>& flat, int index, int n, int64_t offset) {
  const int64_t psi = int64_t(flat.size()), S = shard_size(psi, n);
  std::vector<float> shard(std::size_t(S), 0.0f);
  for (int64_t k = 0; k < S; ++k) {
    const int64_t at = index * S + k + offset;
    if (at < psi) shard[std::size_t(k)] = flat[std::size_t(at)];
  }
  return shard;
}

std::vector<float> zero_place_shard(const std::vector<float>& shard, int64_t psi, int index, int n) {
  const int64_t S = shard_size(psi, n);
  std::vector<float> flat(std::size_t(psi), 0.0f);
  for (int64_t k = 0; k < S && index * S + k < psi; ++k) flat[std::size_t(index * S + k)] = shard[std::size_t(k)];
  return flat;
}

namespace {

using ZeroClock = std::chrono::steady_clock;

double zero_seconds_since(ZeroClock::time_point t0) {
  return std::chrono::duration<double>(ZeroClock::now() - t0).count();
}

class ZeroRank {
 public:
  ZeroRank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
           const ZeroSettings& s, Lighthouse& lh, ZeroRecord& record)
      : rank_(rank), device_(device), o_(o), data_(data), plan_(plan), s_(s), lh_(lh), rec_(record),
        model_(build_model(o, device)), params_(model_.parameters()) {
    for (const NamedTensor& p : model_.named_parameters()) layout_.push_back({p.name, p.tensor.shape()});
    psi_ = model_.num_parameters();
  }

  void run() {
    for (int64_t slot = 0; slot < o_.steps; ++slot) {
      const Quorum q = lh_.quorum(rank_, slot, committed_);
      if (!q.member) throw Error("rank " + std::to_string(rank_) + " was left out of a --zero quorum: it asked late");
      const FaultEvent* e = plan_.at(rank_, slot);
      try {
        if (members_.empty()) start(q);
        else if (q.members != members_) recover(q, slot);
        if (!step(q, slot, e && e->kind == FaultKind::Crash)) return;  // crashed: this process is gone
      } catch (const PeerFailed& failed) {
        drop(slot, failed.what());
      } catch (const Timeout& timeout) {
        drop(slot, timeout.what());
      }
    }
    lh_.finished();
    std::lock_guard<std::mutex> lock(rec_.mutex);
    rec_.finals[std::size_t(rank_)] = flat();
    rec_.shards[std::size_t(rank_)] = momentum_;
    rec_.index[std::size_t(rank_)] = index_;
    rec_.buddy_bytes[std::size_t(rank_)] = int64_t(buddy_.size() * sizeof(float));
    rec_.buddy_sent[std::size_t(rank_)] = sent_;
  }

 private:
  std::vector<float> flat() const {
    std::vector<float> out;
    for (const Tensor& p : params_) {
      std::vector<float> v = p.to_vector();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  void set_flat(const std::vector<float>& v) {
    std::size_t at = 0;
    for (Tensor& p : params_) {
      Tensor host = Tensor::zeros(p.shape(), Device::host());
      std::copy(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + std::size_t(p.numel())), host.data());
      p.copy_from(host);
      at += std::size_t(p.numel());
    }
  }
  int n() const { return int(members_.size()); }
  // My shard as commit_step left it: its parameters into my place of the replica, its momentum mine.
  void keep_shard(Replica& live) {
    std::vector<float> all = flat();
    const int64_t S = shard_size(psi_, n());
    for (int64_t k = 0; k < S && k < int64_t(live.params.size()) && index_ * S + k < psi_; ++k)
      all[std::size_t(index_ * S + k)] = live.params[std::size_t(k)];
    set_flat(all);
    momentum_ = std::move(live.momentum);
  }

  // The first quorum: zero momentum, cut for n; the checkpoint of step 0.
  void start(const Quorum& q) {
    members_ = q.members;
    index_ = q.index;
    momentum_.assign(std::size_t(shard_size(psi_, n())), 0.0f);
    buddy_ = stale_ = s_.buddy && n() > 1 ? momentum_ : std::vector<float>{};  // one rank: no neighbour
    if (!s_.buddy) save(q);
  }

  // Fewer members: whose shard is gone, and how it comes back.
  void recover(const Quorum& q, int64_t slot) {
    const auto t0 = ZeroClock::now();
    const std::vector<int> old = members_;
    const int n0 = int(old.size()), i0 = index_;
    auto alive = [&](int j) { return std::count(q.members.begin(), q.members.end(), old[std::size_t(j)]) > 0; };
    const int64_t before = committed_;
    std::vector<float> full;  // the whole momentum, Ψ floats
    if (s_.buddy) {
      for (int j = 0; j < n0; ++j)
        if (!alive(j) && !alive((j + n0 - 1) % n0))
          throw Error("world ranks " + std::to_string(old[std::size_t((j + n0 - 1) % n0)]) + " and " +
                      std::to_string(old[std::size_t(j)]) + " are both gone: the shard and its only buddy copy "
                      "with them; --shard-recovery buddy survives one loss per pair of neighbours (use checkpoint)");
      full = zero_place_shard(momentum_, psi_, i0, n0);  // mine, and my right neighbour's if it died
      const int right = (i0 + 1) % n0;
      if (right != i0 && !alive(right)) {
        const std::vector<float> theirs = zero_place_shard(buddy_, psi_, right, n0);
        for (std::size_t k = 0; k < full.size(); ++k) full[k] += theirs[k];
      }
      q.comm->all_reduce(full.data(), psi_, ReduceOp::Sum);  // one holder per float: the sum is a copy
    } else {
      const ShardState loaded = load_checkpoint_shard(s_.dir, q.index, int(q.members.size()));  // N → M
      std::vector<float> params = zero_place_shard(loaded.params, psi_, q.index, int(q.members.size()));
      q.comm->all_reduce(params.data(), psi_, ReduceOp::Sum);
      set_flat(params);
      full = zero_place_shard(loaded.exp_avg, psi_, q.index, int(q.members.size()));
      q.comm->all_reduce(full.data(), psi_, ReduceOp::Sum);
      committed_ = loaded.step;
      cursor_ = std::stoll(loaded.meta.at("cursor"));
    }
    members_ = q.members;
    index_ = q.index;
    momentum_ = zero_shard_of(full, index_, n(), s_.mistake == "off-by-one" ? 1 : 0);
    buddy_.assign(s_.buddy && n() > 1 ? momentum_.size() : 0, 0.0f);
    if (s_.buddy) refresh_buddy(*q.comm, momentum_, buddy_);
    stale_ = buddy_;
    if (index_ == 0) {
      std::lock_guard<std::mutex> lock(rec_.mutex);
      rec_.ledger.resize(std::size_t(committed_));  // a checkpoint's lost steps are undone
      rec_.recoveries.push_back(ZeroRecovery{slot, n0, n(), before, committed_, zero_seconds_since(t0)});
    }
  }

  // My shard to my left neighbour; my right neighbour's into `copy`.
  void refresh_buddy(Communicator& comm, const std::vector<float>& mine, std::vector<float>& copy) {
    if (n() < 2) return;
    comm.sendrecv(mine.data(), int64_t(mine.size()), (index_ + n() - 1) % n(), copy.data(), int64_t(copy.size()),
                  (index_ + 1) % n());
  }

  // The sealed checkpoint of this committed step: every member its shard, the first seals it.
  void save(const Quorum& q) {
    const auto t0 = ZeroClock::now();
    const std::vector<float> params = flat();
    ShardState shard;
    shard.rank = index_;
    shard.world = n();
    shard.step = committed_;
    shard.psi = psi_;
    shard.params = zero_shard_of(params, index_, n());
    shard.exp_avg = momentum_;  // momentum SGD's one buffer, in Adam's first slot;
    shard.exp_avg_sq.assign(momentum_.size(), 0.0f);  // the format keeps two or none: zeros in the second
    shard.layout = layout_;
    shard.meta = {{"cursor", std::to_string(cursor_)}, {"optimizer", "momentum"}};
    save_checkpoint_shard(s_.dir, shard);
    q.comm->barrier();
    if (index_ == 0) {
      finish_checkpoint(s_.dir, shard);
      std::lock_guard<std::mutex> lock(rec_.mutex);
      ++rec_.checkpoints;
    }
    q.comm->barrier();
    if (index_ == 0) {
      std::lock_guard<std::mutex> lock(rec_.mutex);
      rec_.upkeep_seconds += zero_seconds_since(t0);
    }
  }

  void drop(int64_t slot, const std::string& what) {
    lh_.broken(slot);
    std::lock_guard<std::mutex> lock(rec_.mutex);
    const std::string prefix = "step " + std::to_string(slot) + ": ";
    for (const std::string& d : rec_.dropped)
      if (d.compare(0, prefix.size(), prefix) == 0) return;
    rec_.dropped.push_back(prefix + what.substr(0, what.find('\n')));
  }

  bool step(const Quorum& q, int64_t slot, bool crash_here) {
    const auto t0 = ZeroClock::now();
    const int64_t global = o_.batch * s_.world;  // the global batch is kept on fewer ranks
    std::vector<int64_t> batch(static_cast<std::size_t>(global), 0);
    for (int64_t i = 0; i < global; ++i) batch[std::size_t(i)] = sample_at(cursor_ + i, data_.size(), o_.seed);
    const int64_t lo = index_ * global / n(), hi = (index_ + 1) * global / n();
    for (Tensor& p : params_) p.zero_grad();
    Batch b = gather_batch(data_, std::vector<int64_t>(batch.begin() + lo, batch.begin() + hi), device_);
    softmax_cross_entropy(model_.forward(b.x), b.y).backward();
    std::vector<float> grad;
    bool fine = true;
    for (const Tensor& p : params_) {
      std::vector<float> g = p.grad().to_vector();
      for (float& x : g) x *= float(hi - lo) / float(global), fine = fine && std::isfinite(x);
      grad.insert(grad.end(), g.begin(), g.end());
    }
    q.comm->all_reduce(grad.data(), psi_, ReduceOp::Sum);
    const std::vector<float> my_grad = zero_shard_of(grad, index_, n());  // my slice of the sum
    Replica next{zero_shard_of(flat(), index_, n()), momentum_};  // prepared: my shard if the step commits
    apply_momentum(next, my_grad, o_.lr);
    std::vector<float> copy(buddy_.size(), 0.0f);
    const int left = (index_ + n() - 1) % n();
    const int64_t sent_before = q.comm->traffic().bytes(index_, left);
    const auto refresh_t0 = ZeroClock::now();
    if (s_.buddy) refresh_buddy(*q.comm, next.momentum, copy);
    const double refresh_s = zero_seconds_since(refresh_t0);
    const int64_t sent = q.comm->traffic().bytes(index_, left) - sent_before;
    std::vector<float> params = zero_place_shard(next.params, psi_, index_, n());
    q.comm->all_reduce(params.data(), psi_, ReduceOp::Sum);  // the all-gather of the new parameters
    if (crash_here) {  // after the prepare, before the vote: its shard of the momentum dies with it
      lh_.leave(rank_, "crashed at step " + std::to_string(slot));
      revoke(*q.comm, "world rank " + std::to_string(rank_) + " crashed at step " + std::to_string(slot));
      return false;
    }
    // The vote and the commit are your commit_step (ch16.h), on my shard: its slice of the parameters and
    // my momentum shard, with my slice of the summed gradient. Whatever it leaves there is this member's.
    Replica live{zero_shard_of(flat(), index_, n()), momentum_};
    bool committed = false;
    try {
      committed = commit_step(*q.comm, live, my_grad, o_.lr, fine);
    } catch (...) {
      keep_shard(live);
      throw;
    }
    if (committed) set_flat(params);  // the others' shards as they prepared them; mine next
    keep_shard(live);
    if (!committed) {
      drop(slot, "a member's gradient was not finite: the vote said no");
      return true;
    }
    if (s_.mistake == "stale-buddy") buddy_ = std::exchange(stale_, copy);  // kept one step late
    else buddy_ = std::move(copy);
    ++committed_;
    cursor_ += global;
    sent_ = sent;
    if (index_ == 0) {
      std::lock_guard<std::mutex> lock(rec_.mutex);
      rec_.ledger.push_back(LedgerEntry{slot, q.id, n(), o_.lr, batch, q.members});
      rec_.step_seconds += zero_seconds_since(t0);
      rec_.upkeep_seconds += s_.buddy ? refresh_s : 0.0;
      ++rec_.steps_timed;
    }
    if (!s_.buddy && committed_ % s_.checkpoint_every == 0) save(q);
    return true;
  }

  const int rank_;
  Device& device_;
  const Options& o_;
  const Dataset& data_;
  const FaultPlan& plan_;
  const ZeroSettings& s_;
  Lighthouse& lh_;
  ZeroRecord& rec_;
  MLP model_;
  std::vector<Tensor> params_;
  std::vector<std::pair<std::string, Shape>> layout_;
  int64_t psi_ = 0;
  std::vector<int> members_;    // the quorum the shards are cut for
  int index_ = 0;               // my place in it
  std::vector<float> momentum_; // my shard, S floats
  std::vector<float> buddy_;    // my right neighbour's shard (buddy policy)
  std::vector<float> stale_;    // the planted stale-buddy's previous copy
  int64_t committed_ = 0;
  int64_t cursor_ = 0;
  int64_t sent_ = 0;            // bytes the last committed step's buddy refresh sent
};

}  // namespace

void run_zero_rank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
                   const ZeroSettings& s, Lighthouse& lighthouse, ZeroRecord& record) {
  try {
    ZeroRank(rank, device, o, data, plan, s, lighthouse, record).run();
  } catch (...) {
    lighthouse.finished();
    throw;
  }
}

}  // namespace dpt::ch16
