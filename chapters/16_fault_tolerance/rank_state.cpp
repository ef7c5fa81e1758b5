// rank_state.cpp — a rank's state as flat vectors, and its checksum
// (elastic_rank_parts.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dpt/check.h"
#include "dpt/ops.h"
#include "dpt/options.h"
#include "elastic_rank_parts.h"

namespace dpt::ch16::parts {

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

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

MemberState member_state(const RankState& st, const std::vector<float>& last_grad, int world_rank,
                         double step_seconds) {
  return MemberState{Replica{flat_parameters(st), st.momentum}, st.committed, st.cursor, last_grad, world_rank,
                     step_seconds};
}

void take_member_state(RankState& st, std::vector<float>& last_grad, const MemberState& s) {
  set_flat_parameters(st, s.replica.params);
  st.momentum = s.replica.momentum;
  st.committed = s.committed, st.cursor = s.cursor;
  last_grad = s.grad;
}

// FNV-1a over the parameters' bytes: equal replicas, equal sums.
uint64_t checksum_of(const std::vector<float>& flat) {
  uint64_t h = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(flat.data());
  for (std::size_t i = 0; i < flat.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  return h;
}

void flip_a_bit(RankState& st) {
  std::vector<float> flat = flat_parameters(st);
  uint32_t bits;
  std::memcpy(&bits, &flat[0], 4);
  bits ^= 1u << 22;
  std::memcpy(&flat[0], &bits, 4);
  set_flat_parameters(st, flat);
}

StepPlan plan_step(const Options& o, const ElasticSettings& s, int64_t cursor, int n, int64_t samples) {
  StepPlan p;
  p.global = s.keep_global_batch ? o.batch * s.world : o.batch * n;
  p.lr = s.keep_global_batch ? o.lr : o.lr * float(n) / float(s.world);
  p.share = assign_samples(cursor, n, p.global, samples, o.seed);  // your hole (ch16.h)
  DPT_CHECK(p.share.shards.size() == std::size_t(n), "assign_samples: " << p.share.shards.size() << " shards for " << n
                                                         << " members; the contract (ch16.h) asks one per member");
  for (const std::vector<int64_t>& piece : p.share.shards) p.batch.insert(p.batch.end(), piece.begin(), piece.end());
  return p;
}

std::vector<float> member_gradient(RankState& st, const Dataset& data, const std::vector<int64_t>& shard,
                                   int64_t global, Device& device, bool& fine) {
  for (Tensor& p : st.params) p.zero_grad();
  Batch b = gather_batch(data, shard, device);
  softmax_cross_entropy(st.model.forward(b.x), b.y).backward();
  std::vector<float> grad;
  fine = true;
  const float weight = global == 0 ? 0.0f : float(shard.size()) / float(global);  // a shard's mean, weighted into the step's
  for (const Tensor& p : st.params) {
    std::vector<float> g = p.grad().to_vector();
    for (float& x : g) x *= weight, fine = fine && std::isfinite(x);
    grad.insert(grad.end(), g.begin(), g.end());
  }
  return grad;
}

std::vector<int> checksum_dissenters(const std::vector<uint64_t>& sums, const std::vector<bool>& voting, bool& tie) {
  uint64_t majority = 0;
  int best = 0, voters = 0;
  for (std::size_t i = 0; i < sums.size(); ++i) {
    if (!voting[i]) continue;
    ++voters;
    int agree = 0;
    for (std::size_t j = 0; j < sums.size(); ++j) agree += voting[j] && sums[j] == sums[i];
    if (agree > best) best = agree, majority = sums[i];
  }
  tie = 2 * best <= voters;  // no strict majority (two replicas, or two against two): all suspect
  std::vector<int> named;
  for (std::size_t i = 0; i < sums.size(); ++i)
    if (voting[i] && (sums[i] != majority || (tie && best < voters))) named.push_back(int(i));
  return named;
}

}  // namespace dpt::ch16::parts
