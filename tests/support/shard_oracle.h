// shard_oracle.h — the oracle for sharded-checkpoint tests: a model's state as
// the unpadded flat vectors (Ψ,) built by hand, and rank r's slice of them
// cut by hand, index by index. It shares no code with dpt's re-sharding
// (gather_flat) nor with dpt::shard_size.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dpt/nn.h"
#include "dpt/sharded_checkpoint.h"

namespace dpt_test {

/// A model's whole optimizer-visible state, unpadded, in flat parameter order.
struct FullState {
  std::vector<std::pair<std::string, dpt::Shape>> layout;  ///< names and shapes, flat order
  std::vector<float> params, exp_avg, exp_avg_sq;          ///< (Ψ,) each
  int64_t psi() const { return int64_t(params.size()); }
};

/// What saved shards hold past Ψ in these tests: loading must never read it back.
constexpr float kPaddingGarbage = -777.0f;

/// The MLP 5-4-3-2 initialised from `seed`: Ψ = 47 (prime, so no world of 2..4
/// ranks divides it). Parameters are the model's own, concatenated tensor by
/// tensor; the moments are distinct, exactly representable values
/// (exp_avg[i] = i + 0.5, exp_avg_sq[i] = 1000 + i + seed) that cannot be
/// mistaken for each other or for a parameter.
inline FullState mlp_state(uint64_t seed) {
  dpt::Rng rng(seed);
  dpt::MLP model({5, 4, 3, 2}, dpt::Device::host(), rng);
  FullState s;
  for (const auto& p : model.named_parameters()) {
    s.layout.push_back({p.name, p.tensor.shape()});
    for (float v : p.tensor.to_vector()) s.params.push_back(v);
  }
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    s.exp_avg.push_back(float(i) + 0.5f);
    s.exp_avg_sq.push_back(1000.0f + float(i + seed));
  }
  return s;
}

/// Ψ = 3, one tensor "w" (3,): on 4 ranks the last rank holds only padding.
inline FullState tiny_state() { return {{{"w", {3}}}, {1.0f, 2.0f, 3.0f}, {0.25f, 0.5f, 0.75f}, {4.0f, 5.0f, 6.0f}}; }

/// Rank r's shard of `flat` for `world` ranks: floats [r·S, (r+1)·S) with
/// S = ceil(Ψ/world), and `pad` past Ψ.
inline std::vector<float> slice(const std::vector<float>& flat, int r, int world, float pad) {
  std::size_t S = (flat.size() + std::size_t(world) - 1) / std::size_t(world);
  std::vector<float> out;
  for (std::size_t i = std::size_t(r) * S; i < std::size_t(r + 1) * S; ++i)
    out.push_back(i < flat.size() ? flat[i] : pad);
  return out;
}

/// What rank r of `world` hands save_checkpoint_shard at `step`: its slices,
/// with garbage in the padding. `adam` false: SGD, no moments.
inline dpt::ShardState shard_of(const FullState& s, int r, int world, int64_t step, bool adam = true) {
  dpt::ShardState shard;
  shard.rank = r;
  shard.world = world;
  shard.step = step;
  shard.psi = s.psi();
  shard.layout = s.layout;
  shard.params = slice(s.params, r, world, kPaddingGarbage);
  if (adam) {
    shard.exp_avg = slice(s.exp_avg, r, world, kPaddingGarbage);
    shard.exp_avg_sq = slice(s.exp_avg_sq, r, world, kPaddingGarbage);
  }
  shard.meta = {{"seed", "7"}, {"optimizer", adam ? "adam" : "sgd"}};
  return shard;
}

}  // namespace dpt_test
