// ch07_ranks.h — what chapter 07's stage and layer tests share: checks
// recorded from rank threads (RANK_CHECK), a tensor of given values on the
// rank's device, the ZeroState each stage keeps written out by hand (the
// oracle), and a traffic log cleared between barriers.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "ch07.h"
#include "support/catch.h"
#include "dpt/launch.h"

namespace dpt_test {

/// Catch2's assertions are not thread-safe: rank threads record what failed
/// here (RANK_CHECK), and the test thread asserts on the list after run_ranks.
/// The partition of `psi` parameters over `world` ranks, written out by hand
/// (S = ⌈Ψ/N⌉, padded to N·S): the tests' oracle, not the partition_parameters hole.
inline dpt::ch07::Partition ceil_partition(int64_t psi, int world) {
  const int64_t shard = (psi + world - 1) / world;
  return {psi, world, shard, shard * world};
}

/// Fails the calling test naming shard_bounds when it is wrong for `range`:
/// the stage and layer holes consume its result, and their own tests would
/// otherwise report its fault as theirs. The oracle counts, element by
/// element, which shard each element of the range lies in (x / S).
inline void require_shard_bounds(const dpt::ch07::Partition& part, dpt::Range range) {
  std::vector<int64_t> want(std::size_t(part.world) + 1, 0);
  for (int64_t x = range.begin; x < range.end; ++x) ++want[std::size_t(x / part.shard) + 1];
  for (std::size_t r = 1; r < want.size(); ++r) want[r] += want[r - 1];
  std::vector<int64_t> got = dpt::ch07::shard_bounds(part, range);
  if (got == want) return;
  auto listed = [](const std::vector<int64_t>& v) {
    std::string text = "{";
    for (std::size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
    return text + "}";
  };
  FAIL("shard_bounds (exercises/07_zero/partition.cpp) returned " << listed(got) << " for range [" << range.begin
       << ", " << range.end << ") with N = " << part.world << ", S = " << part.shard << ", which are not offsets "
       << "from range.begin of each rank's part [r*S, (r+1)*S). This test needs them: their own test (\"shard_bounds: "
       << "…\") says which property fails");
}

struct RankChecks {
  std::mutex mutex;
  std::vector<std::string> failed;  ///< "rank r: expression", in the order seen
  void check(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(mutex);
    failed.push_back(what);
  }
  std::string text() const {
    std::string all;
    for (const std::string& f : failed) all += f + "\n";
    return all;
  }
};

inline dpt::Tensor on_device(dpt::Context& ctx, const std::vector<float>& values) {
  return dpt::Tensor::from_vector({int64_t(values.size())}, values, ctx.device);
}

// What each stage keeps, written out here (the oracle; the trainer allocates the same).
inline dpt::ch07::ZeroState state_for(dpt::Context& ctx, const dpt::ch07::Partition& part, int stage,
                                      std::vector<dpt::Range> layers = {}) {
  dpt::ch07::ZeroState s{ctx.comm, ctx.device};
  s.part = part, s.stage = stage, s.layers = layers;
  const int64_t P = part.padded, S = part.shard;
  s.params = dpt::Tensor::zeros({stage <= 2 ? P : S}, ctx.device);
  s.grads = dpt::Tensor::zeros({stage <= 1 ? P : S}, ctx.device);
  s.m = dpt::Tensor::zeros({stage == 0 ? P : S}, ctx.device);
  s.v = dpt::Tensor::zeros({stage == 0 ? P : S}, ctx.device);
  s.gathered.resize(layers.size());
  return s;
}

inline void clear_traffic(dpt::Context& ctx) {
  ctx.comm.barrier();
  ctx.comm.traffic().clear();
  ctx.comm.barrier();
}

}  // namespace dpt_test

/// Records `cond` on `checks` from a rank thread, naming the rank and the expression.
#define RANK_CHECK(checks, ctx, cond) (checks).check(bool(cond), "rank " + std::to_string((ctx).rank) + ": " #cond)
