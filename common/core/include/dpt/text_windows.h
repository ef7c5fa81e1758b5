/// @file text_windows.h
/// @brief A token stream cut into training windows: the held-out split, the
/// windows of each step's global batch, each replica's share of them, and
/// the fixed windows held-out loss is measured on.
///
/// A *window* of context T is T + 1 consecutive tokens from `start`: the
/// inputs are tokens [start, start + T), the targets tokens [start + 1,
/// start + T + 1), the same tokens shifted by one, so each of the T positions
/// predicts the token after it. Starts run from 0 to N − T − 2, so the last
/// target is at most token N − 2 (the formula, kept as written).
///
/// The global batch of step s is G = D·B windows g = 0 … G − 1; replica d of
/// D takes g in [d·B, (d+1)·B). So D replicas with B windows each see
/// exactly the windows one device with G windows sees (chapter 03's
/// equivalence, now for text):
///
/// - without shuffling, window g of step s starts at ((s·G + g)·T) mod (N − T − 1):
///   consecutive windows, each target run continuing where the last ended,
///   wrapping at the end of the split;
/// - shuffled, the G starts of step s are drawn uniformly from [0, N − T − 1)
///   by a generator seeded from (seed, s) alone (nanoGPT's random offsets).
///   Every replica draws the same G and keeps its own B: no communication,
///   and any step can be drawn without replaying the ones before it.
///
///     WindowSampler sampler(train.size(), T, D * B, shuffle, seed);
///     TokenBatch batch = window_batch(train, sampler.replica_starts(step, d, D), T);
///     // batch.inputs (B·T) → the model's logits (B·T, V) ← batch.targets (B·T)
///
/// Left out: document boundaries (the text is one stream), padding.
#pragma once

#include <cstdint>
#include <vector>

namespace dpt {

/// A corpus's tokens, split: training first, the last tenth held out.
struct TextSplit {
  std::vector<int64_t> train;     ///< tokens [0, ⌊9N/10⌋)
  std::vector<int64_t> held_out;  ///< tokens [⌊9N/10⌋, N)
};
/// Splits `tokens` as nanoGPT does (train = data[:int(n*0.9)]): the first
/// ⌊9N/10⌋ tokens train, the rest are held out, so held-out text is later
/// text the model never saw, not a sample of the same verses.
TextSplit split_held_out(const std::vector<int64_t>& tokens);

/// The fewest tokens a split needs for windows of context T: T + 2 (one
/// window, T + 1 tokens, and a modulus N − T − 1 ≥ 1).
inline int64_t min_tokens_for(int64_t context) { return context + 2; }

/// Which windows form the global batch of each step (see the file comment).
class WindowSampler {
 public:
  /// Windows of `context` T over `tokens` N ≥ T + 2 tokens, `global_batch`
  /// G ≥ 1 of them a step; `seed` picks the shuffled starts. Throws
  /// dpt::Error when N < T + 2.
  WindowSampler(int64_t tokens, int64_t context, int64_t global_batch, bool shuffle, uint64_t seed);
  /// The G starts of step `step` ≥ 0, window g at index g.
  std::vector<int64_t> starts(int64_t step) const;
  /// Replica `rank` of `world`'s share of step `step`: starts(step)[rank·B,
  /// (rank + 1)·B) with B = G / world (world must divide G).
  std::vector<int64_t> replica_starts(int64_t step, int rank, int world) const;
  /// G, windows per step over all replicas.
  int64_t global_batch() const { return global_batch_; }
  /// T, the context.
  int64_t context() const { return context_; }

 private:
  int64_t tokens_, context_, global_batch_;
  bool shuffle_;
  uint64_t seed_;
};

/// Windows as the model takes them: row-major (B, T) token ids on the host.
struct TokenBatch {
  std::vector<int64_t> inputs;   ///< (B·T): row b = tokens [start_b, start_b + T)
  std::vector<int64_t> targets;  ///< (B·T): row b = tokens [start_b + 1, start_b + T + 1)
  int64_t windows = 0;           ///< B
  int64_t context = 0;           ///< T
};
/// The windows starting at `starts` (each in [0, N − T − 1]) of `tokens`.
TokenBatch window_batch(const std::vector<int64_t>& tokens, const std::vector<int64_t>& starts, int64_t context);

/// Fixed windows to measure held-out loss on, the same every run and every
/// world size. The split's K = ⌊(N − 1)/T⌋ *tiles* start at k·T (k = 0 …
/// K − 1) and never overlap: together they predict every token but the
/// first and the at most T − 1 after the last tile, each once. `count` = 0
/// or ≥ K gives all K tiles; a smaller count gives tiles ⌊k·K/count⌋ for
/// k = 0 … count − 1, spread over the whole split, not its beginning.
/// Throws dpt::Error when N < T + 2.
std::vector<int64_t> evaluation_starts(int64_t tokens, int64_t context, int64_t count = 0);

}  // namespace dpt
