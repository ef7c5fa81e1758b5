// solutions/09_parameter_server/server.cpp — the server's apply-on-push
// (spec: ch09.h). Sync adds the round's pushes up in scratch, counts them in
// tally, and takes one SGD step with their mean once all W have arrived,
// whichever worker's push is the last: one device's step on the W batches as
// one (equal batches: its gradient is the mean of theirs). Async
// and ssp take a plain SGD step per push. Staleness is read before the
// version moves: the updates since this worker was last answered.
#include "ch09.h"

namespace dpt::ch09 {

bool apply_push(ServerShard& shard, int worker, const float* grad) {
  const std::size_t n = shard.params.size();
  shard.staleness.push_back(shard.version - shard.read_version[std::size_t(worker)]);
  if (shard.mode != Mode::Sync) {
    for (std::size_t i = 0; i < n; ++i) shard.params[i] -= shard.lr * grad[i];
    ++shard.version;
    return true;
  }
  for (std::size_t i = 0; i < n; ++i) shard.scratch[i] += grad[i];
  if (++shard.tally < shard.workers) return false;  // the round is not complete yet
  for (std::size_t i = 0; i < n; ++i) {
    shard.params[i] -= shard.lr * (shard.scratch[i] / float(shard.workers));
    shard.scratch[i] = 0;
  }
  shard.tally = 0;
  ++shard.version;
  return true;
}

}  // namespace dpt::ch09
