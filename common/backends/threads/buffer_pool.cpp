// buffer_pool.cpp — where eager sends' copies live. Buffers are reused: a
// fresh large allocation costs a page fault per 4 KiB on first touch, which
// would halve the bandwidth of repeated sends. Called with the world's mutex
// held (mailbox.cpp). Left out: per-size bins, freeing under memory pressure.
#include <algorithm>

#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

namespace {
constexpr int64_t kPoolBytes = int64_t(256) << 20;
constexpr std::size_t kPoolBuffers = 64;
}  // namespace

Message World::take_buffer(int64_t count) {
  Message m;
  int best = -1;  // the smallest pooled buffer that fits
  for (std::size_t i = 0; i < pool_.size(); ++i)
    if (pool_[i].second >= count && (best < 0 || pool_[i].second < pool_[best].second)) best = int(i);
  if (best >= 0) {
    m.owned = std::move(pool_[best].first);
    m.capacity = pool_[best].second;
    pooled_bytes_ -= 4 * m.capacity;
    pool_.erase(pool_.begin() + best);
  } else {
    m.capacity = std::max<int64_t>(count, 1);
    m.owned.reset(new float[m.capacity]);
  }
  return m;
}

void World::recycle(Message& m) {
  if (!m.owned || pool_.size() >= kPoolBuffers || pooled_bytes_ + 4 * m.capacity > kPoolBytes) return;
  pooled_bytes_ += 4 * m.capacity;
  pool_.emplace_back(std::move(m.owned), m.capacity);
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
