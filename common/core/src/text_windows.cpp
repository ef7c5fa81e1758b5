// text_windows.cpp — the held-out split, each step's windows, and evaluation's tiles.
#include "dpt/text_windows.h"

#include "dpt/check.h"
#include "dpt/nn.h"

namespace dpt {

TextSplit split_held_out(const std::vector<int64_t>& tokens) {
  auto cut = tokens.begin() + std::ptrdiff_t(int64_t(tokens.size()) * 9 / 10);
  return {std::vector<int64_t>(tokens.begin(), cut), std::vector<int64_t>(cut, tokens.end())};
}

namespace {
void check_fits(int64_t tokens, int64_t context) {
  DPT_CHECK(context >= 1, "a window needs a context of at least 1 token, got " << context);
  DPT_CHECK(tokens >= min_tokens_for(context),
            tokens << " tokens are too few for windows of context " << context << ": they need at least "
                   << min_tokens_for(context) << " (a window of " << context + 1 << " tokens and a second start)");
}

// A seed for step `step`'s draws that depends on (seed, step) only. Two rounds
// of splitmix64's finaliser, so neighbouring steps (or seeds) share nothing:
// Rng(s) and Rng(s + γ) would share three of their four state words.
uint64_t step_seed(uint64_t seed, int64_t step) {
  uint64_t z = seed;
  for (uint64_t word : {uint64_t(step), uint64_t(0x7E47)}) {
    z ^= word + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return z;
}
}  // namespace

WindowSampler::WindowSampler(int64_t tokens, int64_t context, int64_t global_batch, bool shuffle, uint64_t seed)
    : tokens_(tokens), context_(context), global_batch_(global_batch), shuffle_(shuffle), seed_(seed) {
  check_fits(tokens, context);
  DPT_CHECK(global_batch >= 1, "a step needs at least one window, got a global batch of " << global_batch);
}

std::vector<int64_t> WindowSampler::starts(int64_t step) const {
  DPT_CHECK(step >= 0, "steps count from 0, got " << step);
  const int64_t G = global_batch_, T = context_, starts_range = tokens_ - T - 1;  // starts in [0, N − T − 1)
  std::vector<int64_t> out(std::size_t(G), 0);
  if (shuffle_) {
    Rng rng(step_seed(seed_, step));
    for (auto& start : out) start = int64_t(rng.below(uint64_t(starts_range)));
    return out;
  }
  // ((s·G + g)·T) mod (N − T − 1), reduced as it goes: s·G·T overflows int64
  // at s ≈ 10^13 / (G·T), a long run's step count for a large batch.
  const int64_t first = ((step % starts_range) * (G % starts_range) % starts_range) * (T % starts_range) % starts_range;
  for (int64_t g = 0; g < G; ++g) out[std::size_t(g)] = (first + (g % starts_range) * T) % starts_range;
  return out;
}

std::vector<int64_t> WindowSampler::replica_starts(int64_t step, int rank, int world) const {
  DPT_CHECK(world >= 1 && rank >= 0 && rank < world, "replica " << rank << " of " << world << " does not exist");
  DPT_CHECK(global_batch_ % world == 0,
            "a global batch of " << global_batch_ << " windows does not split evenly over " << world << " replicas");
  const int64_t B = global_batch_ / world;
  std::vector<int64_t> all = starts(step);
  return std::vector<int64_t>(all.begin() + std::ptrdiff_t(rank * B), all.begin() + std::ptrdiff_t((rank + 1) * B));
}

TokenBatch window_batch(const std::vector<int64_t>& tokens, const std::vector<int64_t>& starts, int64_t context) {
  const int64_t N = int64_t(tokens.size()), T = context;
  TokenBatch batch;
  batch.windows = int64_t(starts.size());
  batch.context = T;
  batch.inputs.reserve(starts.size() * std::size_t(T));
  batch.targets.reserve(starts.size() * std::size_t(T));
  for (int64_t start : starts) {
    DPT_CHECK(T >= 1 && start >= 0 && start + T + 1 <= N,
              "a window of " << T + 1 << " tokens from " << start << " does not fit in " << N << " tokens");
    auto first = tokens.begin() + std::ptrdiff_t(start);
    batch.inputs.insert(batch.inputs.end(), first, first + std::ptrdiff_t(T));
    batch.targets.insert(batch.targets.end(), first + 1, first + std::ptrdiff_t(T) + 1);
  }
  return batch;
}

std::vector<int64_t> evaluation_starts(int64_t tokens, int64_t context, int64_t count) {
  check_fits(tokens, context);
  DPT_CHECK(count >= 0, "a count of evaluation windows cannot be negative, got " << count);
  const int64_t tiles = (tokens - 1) / context;
  if (count == 0 || count > tiles) count = tiles;
  std::vector<int64_t> out(static_cast<std::size_t>(count));
  for (int64_t k = 0; k < count; ++k) out[std::size_t(k)] = (k * tiles / count) * context;
  return out;
}

}  // namespace dpt
