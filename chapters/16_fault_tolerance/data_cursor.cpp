// data_cursor.cpp — the stream of samples a run consumes: epoch after epoch,
// each in a shuffled order of its own. Which positions a step takes, and
// where the cursor goes once it commits, is assign_samples (ch16.h); a
// dropped or rolled-back step leaves the cursor where it was.
#include <numeric>
#include <random>
#include <vector>

#include "elastic_rank.h"

namespace dpt::ch16 {

int64_t sample_at(int64_t cursor, int64_t samples, uint64_t seed) {
  thread_local int64_t cached_epoch = -1, cached_samples = -1;
  thread_local uint64_t cached_seed = 0;
  thread_local std::vector<int64_t> order;
  const int64_t epoch = cursor / samples;
  if (epoch != cached_epoch || samples != cached_samples || seed != cached_seed) {
    order.resize(std::size_t(samples));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::mt19937_64 rng(seed * 1000003ULL + uint64_t(epoch));
    for (int64_t i = samples - 1; i > 0; --i)  // Fisher-Yates, the same on every library
      std::swap(order[std::size_t(i)], order[std::size_t(rng() % uint64_t(i + 1))]);
    cached_epoch = epoch, cached_samples = samples, cached_seed = seed;
  }
  return order[std::size_t(cursor % samples)];
}

}  // namespace dpt::ch16
