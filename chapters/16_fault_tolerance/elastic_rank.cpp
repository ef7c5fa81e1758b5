// elastic_rank.cpp — one rank of chapter 16 (elastic_rank.h). A slot:
//
//   quorum   ask the lighthouse who trains (bounded wait)
//   heal     a member behind receives parameters, momentum, step and cursor
//   fault    this slot's planned event for this rank (fault_plan.h)
//   check    every K slots and after a change: compare parameter checksums,
//            roll everyone back to the last agreed state if one differs
//   step     gradient all-reduce, then the vote; apply only after the vote
//
// A collective that throws (a revoked group, a timeout) drops the slot on
// every member: nobody has applied anything, the cursor has not moved.
#include "elastic_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "dpt/comm/communicator.h"
#include "dpt/ops.h"
#include "dpt/quorum_group.h"
#include "ring_step.h"

namespace dpt::ch16 {

namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// What a process holds: lost with it on a crash.
struct RankState {
  MLP model;
  std::vector<Tensor> params;
  std::vector<float> momentum;  // flat, Ψ
  int64_t committed = 0, cursor = 0;
};

RankState fresh_state(const Options& o, Device& device) {
  RankState st{build_model(o, device), {}, {}, 0, 0};
  st.params = st.model.parameters();
  st.momentum.assign(std::size_t(st.model.num_parameters()), 0.0f);
  return st;
}

std::vector<float> flat_parameters(const RankState& st) {
  std::vector<float> flat;
  for (const Tensor& p : st.params) {
    std::vector<float> v = p.to_vector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

void set_flat_parameters(RankState& st, const std::vector<float>& flat) {
  std::size_t at = 0;
  for (Tensor& p : st.params) {
    Tensor host = Tensor::zeros(p.shape(), Device::host());
    std::memcpy(host.data(), flat.data() + at, std::size_t(p.numel()) * sizeof(float));
    p.copy_from(host);
    at += std::size_t(p.numel());
  }
}

// FNV-1a over the parameters' bytes: equal replicas, equal sums.
uint64_t checksum_of(const std::vector<float>& flat) {
  uint64_t h = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(flat.data());
  for (std::size_t i = 0; i < flat.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  return h;
}

struct Cursor {
  int64_t committed, cursor;
};

struct Snapshot {
  bool valid = false;
  std::vector<float> params, momentum;
  int64_t committed = 0, cursor = 0;
};

class ElasticRank {
 public:
  ElasticRank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
              const ElasticSettings& s, Lighthouse& lh, RunRecord& record)
      : rank_(rank), device_(device), o_(o), data_(data), plan_(plan), s_(s), lh_(lh), record_(record),
        st_(fresh_state(o, device)) {}

  void run();

 private:
  // A crash or a freeze: this process is gone. True when a join restarts it at *slot.
  bool out_until_join(int64_t& slot, bool crashed, const std::string& why);
  void heal(const Quorum& q, int64_t slot);
  HealEntry& heal_entry(int64_t slot, int joiner);
  void check(const Quorum& q, int64_t slot);
  bool step(const Quorum& q, int64_t slot, bool crash_here);
  void apply(const std::vector<float>& grad, float lr);
  void drop(int64_t slot, const std::string& what);

  const int rank_;
  Device& device_;
  const Options& o_;
  const Dataset& data_;
  const FaultPlan& plan_;
  const ElasticSettings& s_;
  Lighthouse& lh_;
  RunRecord& record_;
  RankState st_;
  Snapshot snap_;
  double slow_ = 1;
};

bool ElasticRank::out_until_join(int64_t& slot, bool crashed, const std::string& why) {
  if (crashed) lh_.leave(rank_, why);  // a crash closes the connection; a freeze just goes quiet
  int64_t join = -1;
  for (const FaultEvent& e : plan_.events())
    if (e.rank == rank_ && e.kind == FaultKind::Join && e.step > slot) {
      join = e.step;
      break;
    }
  if (join < 0) return false;
  lh_.expect(rank_, join);  // the restarted process registers when it starts
  if (!lh_.wait_for_slot(join)) return false;
  st_ = fresh_state(o_, device_);  // a new process: nothing of the old one survives
  snap_ = Snapshot{};
  slow_ = 1;
  slot = join;
  return true;
}

void ElasticRank::drop(int64_t slot, const std::string& what) {
  lh_.broken(slot);
  std::lock_guard<std::mutex> lock(record_.mutex);
  const std::string prefix = "step " + std::to_string(slot) + ": ";
  for (const std::string& d : record_.dropped)
    if (d.compare(0, prefix.size(), prefix) == 0) return;
  std::string line = what.substr(0, what.find('\n'));
  const std::size_t cause = line.find("failed: ");  // a revoke names the world rank in its reason
  if (cause != std::string::npos) line = line.substr(cause + 8) + " (the group was revoked)";
  record_.dropped.push_back(prefix + line);
}

void ElasticRank::run() {
  const auto t0 = SteadyClock::now();
  int64_t slot = 0;
  const std::vector<FaultEvent> mine = [&] {
    std::vector<FaultEvent> v;
    for (const FaultEvent& e : plan_.events())
      if (e.rank == rank_) v.push_back(e);
    return v;
  }();
  if (!mine.empty() && mine.front().kind == FaultKind::Join && !out_until_join(slot, false, "")) return;  // a spare
  while (slot < o_.steps) {
    const Quorum q = lh_.quorum(rank_, slot, st_.committed);
    if (!q.member) {  // left out (asked too late): rejoin next slot with a fresh state, healed
      st_ = fresh_state(o_, device_);
      snap_ = Snapshot{};
      lh_.expect(rank_, slot + 1);
      ++slot;
      continue;
    }
    const FaultEvent* e = plan_.at(rank_, slot);
    if (e && e->kind == FaultKind::Freeze) {  // stops answering: the others' collective times out
      if (out_until_join(slot, false, "")) continue;
      break;
    }
    if (e && e->kind == FaultKind::Slow) slow_ = e->factor;
    const bool behind = std::count(q.behind.begin(), q.behind.end(), q.index) > 0;
    try {
      if (!q.behind.empty() && (behind || q.index == q.source)) heal(q, slot);
      if (e && e->kind == FaultKind::BitFlip) {  // silent data corruption: bit 22 of the first weight
        std::vector<float> flat = flat_parameters(st_);
        uint32_t bits;
        std::memcpy(&bits, &flat[0], 4);
        bits ^= 1u << 22;
        std::memcpy(&flat[0], &bits, 4);
        set_flat_parameters(st_, flat);
      }
      if (slot % s_.check_every == 0 || q.new_group || !q.behind.empty()) check(q, slot);
      const bool crash_here = e && e->kind == FaultKind::Crash;
      if (!step(q, slot, crash_here)) {  // crashed: this process is gone
        if (out_until_join(slot, false, "")) continue;
        break;
      }
    } catch (const PeerFailed& failed) {
      if (behind) st_ = fresh_state(o_, device_);  // a half-received heal is no state: heal again
      drop(slot, failed.what());
    } catch (const Timeout& timeout) {
      if (behind) st_ = fresh_state(o_, device_);
      drop(slot, timeout.what());
    }
    ++slot;
  }
  if (slot >= o_.steps) lh_.finished();  // ranks waiting to join later need not wait any more
  std::lock_guard<std::mutex> lock(record_.mutex);
  if (slot >= o_.steps) record_.finals[std::size_t(rank_)] = flat_parameters(st_);
  record_.finish_seconds[std::size_t(rank_)] = seconds_since(t0);
}

// The heal of `joiner` at `slot` (record_.mutex held): the source and the
// joiner each fill their half, in either order.
HealEntry& ElasticRank::heal_entry(int64_t slot, int joiner) {
  for (HealEntry& h : record_.heals)
    if (h.slot == slot && h.joiner == joiner) return h;
  record_.heals.push_back(HealEntry{});
  record_.heals.back().slot = slot;
  record_.heals.back().joiner = joiner;
  return record_.heals.back();
}

// The source sends, to each member behind, its parameters, its momentum and
// (step, cursor); the joiner takes them and is then a replica like any other.
void ElasticRank::heal(const Quorum& q, int64_t slot) {
  Communicator& comm = *q.comm;
  const int64_t psi = st_.model.num_parameters();
  if (q.index == q.source) {
    std::vector<float> flat = flat_parameters(st_);
    const Cursor where{st_.committed, st_.cursor};
    for (int j : q.behind) {
      const int64_t before = comm.traffic().bytes(q.index, j);
      comm.send(flat.data(), psi, j, 11);
      comm.send(st_.momentum.data(), psi, j, 12);
      comm.send(&where, 1, j, 13);
      std::lock_guard<std::mutex> lock(record_.mutex);
      HealEntry& h = heal_entry(slot, q.members[std::size_t(j)]);
      h.source = rank_;
      h.bytes = comm.traffic().bytes(q.index, j) - before;
      h.expected_bytes = 4 * (psi + psi) + 2 * 8;
      h.sent = flat;
    }
    return;
  }
  const auto t0 = SteadyClock::now();
  std::vector<float> flat(std::size_t(psi), 0.0f);
  comm.recv(flat.data(), psi, q.source, 11);
  comm.recv(st_.momentum.data(), psi, q.source, 12);
  Cursor where{0, 0};
  comm.recv(&where, 1, q.source, 13);
  set_flat_parameters(st_, flat);
  st_.committed = where.committed, st_.cursor = where.cursor;
  const double seconds = seconds_since(t0);
  std::lock_guard<std::mutex> lock(record_.mutex);
  HealEntry& h = heal_entry(slot, rank_);
  h.seconds = seconds;
  h.received = flat_parameters(st_);
}

// Every member's checksum; the majority's is the good one. All agree: this is
// the new last good state. One differs: name it, everyone goes back.
void ElasticRank::check(const Quorum& q, int64_t slot) {
  std::vector<float> flat = flat_parameters(st_);
  const std::vector<uint64_t> sums = q.comm->all_gather(checksum_of(flat));
  std::vector<int> named;
  uint64_t majority = sums[0];
  int best = 0;
  for (uint64_t c : sums) {
    const int votes = int(std::count(sums.begin(), sums.end(), c));
    if (votes > best) best = votes, majority = c;
  }
  for (std::size_t i = 0; i < sums.size(); ++i)
    if (sums[i] != majority) named.push_back(q.members[i]);
  if (named.empty()) {
    snap_ = Snapshot{true, flat, st_.momentum, st_.committed, st_.cursor};
    if (q.index == 0) {
      std::lock_guard<std::mutex> lock(record_.mutex);
      ++record_.checks;
    }
    return;
  }
  DPT_CHECK(snap_.valid, "rank " << rank_ << ": the checksums disagree at step " << slot
                                 << " and this rank has no earlier agreed state to go back to");
  const int64_t undone = st_.committed - snap_.committed;
  set_flat_parameters(st_, snap_.params);
  st_.momentum = snap_.momentum;
  st_.committed = snap_.committed, st_.cursor = snap_.cursor;
  if (q.index == 0) {
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.mismatches.push_back({slot, named, snap_.committed, undone});
    record_.ledger.resize(std::size_t(snap_.committed));  // those steps never happened
  }
}

void ElasticRank::apply(const std::vector<float>& grad, float lr) {
  std::vector<float> flat = flat_parameters(st_);
  for (std::size_t i = 0; i < flat.size(); ++i) {  // momentum SGD, μ = 0.9
    st_.momentum[i] = 0.9f * st_.momentum[i] + grad[i];
    flat[i] -= lr * st_.momentum[i];
  }
  set_flat_parameters(st_, flat);
}

// The transaction. Returns false when this rank crashed in it.
bool ElasticRank::step(const Quorum& q, int64_t slot, bool crash_here) {
  const auto t0 = SteadyClock::now();
  const int n = int(q.members.size());
  const int64_t global = s_.keep_global_batch ? o_.batch * s_.world : o_.batch * n;
  const float lr = s_.keep_global_batch ? o_.lr : o_.lr * float(n) / float(s_.world);
  std::vector<int64_t> batch(static_cast<std::size_t>(global), 0);
  for (int64_t i = 0; i < global; ++i) batch[std::size_t(i)] = sample_at(st_.cursor + i, data_.size(), o_.seed);
  const int64_t lo = q.index * global / n, hi = (q.index + 1) * global / n;
  std::vector<int64_t> shard(batch.begin() + lo, batch.begin() + hi);
  for (Tensor& p : st_.params) p.zero_grad();
  Batch b = gather_batch(data_, shard, device_);
  softmax_cross_entropy(st_.model.forward(b.x), b.y).backward();
  std::vector<float> grad;
  const float weight = float(hi - lo) / float(global);  // a mean over the shard, weighted into the global mean
  for (const Tensor& p : st_.params) {
    std::vector<float> g = p.grad().to_vector();
    for (float& x : g) x *= weight;
    grad.insert(grad.end(), g.begin(), g.end());
  }
  if (slow_ > 1) std::this_thread::sleep_for(std::chrono::duration<double>((slow_ - 1) * seconds_since(t0)));
  if (s_.ring && !ring_all_reduce(*q.comm, grad, crash_here)) {  // died mid-ring: nobody is told
    lh_.leave(rank_, "crashed at step " + std::to_string(slot) + ", in the ring's last hop");
    return false;
  }
  if (!s_.ring) q.comm->all_reduce(grad.data(), int64_t(grad.size()), ReduceOp::Sum);
  if (crash_here) {  // after its gradient went in, before the vote: the survivors hold a full sum
    lh_.leave(rank_, "crashed at step " + std::to_string(slot));
    revoke(*q.comm, "world rank " + std::to_string(rank_) + " crashed at step " + std::to_string(slot));
    return false;
  }
  if (s_.apply_before_vote) apply(grad, lr);
  float fine = std::all_of(grad.begin(), grad.end(), [](float x) { return std::isfinite(x); }) ? 1.0f : 0.0f;
  q.comm->all_reduce(&fine, 1, ReduceOp::Sum);  // the vote: it returns only if every member reached it
  if (fine != float(n)) {
    drop(slot, "a member's reduced gradient was not finite");
    return true;
  }
  if (!s_.apply_before_vote) apply(grad, lr);
  ++st_.committed;
  st_.cursor += global;
  if (q.index == 0) {
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.ledger.push_back(LedgerEntry{slot, q.id, n, lr, batch});
  }
  return true;
}

}  // namespace

void run_elastic_rank(int rank, Device& device, const Options& o, const Dataset& data, const FaultPlan& plan,
                      const ElasticSettings& s, Lighthouse& lighthouse, RunRecord& record) {
  ElasticRank(rank, device, o, data, plan, s, lighthouse, record).run();
}

}  // namespace dpt::ch16
