/// @file ch05.h
/// @brief Chapter 05's exercises, specified here once: gradient buckets and
/// the bookkeeping that all-reduces each bucket while backward still runs.
/// Fill them in `exercises/05_bucketing/bucketing.cpp` (hints there);
/// `ctest --preset student -L ch05` checks golden layouts, launch order when
/// hooks fire shuffled, that no bucket leaves before its last gradient is
/// ready, the unused-parameter error, and training against one device.
///
/// The life of one step (the chapter's provided code around your holes):
///
///     BucketState state = make_bucket_state(assign_buckets(bytes, cap, first_cap), ctx.device, launch);
///     // backward: each parameter's grad-ready hook calls
///     mark_ready(state, p);           // may call launch(b) for b = next_launch, …
///     // after backward, before the optimizer step:
///     wait_and_unpack(state, grads, names);
///
/// `launch(b)` (provided) copies bucket b's gradients into state.flat[b] (a
/// tensor on the rank's device: device copies, no trip through the host) and
/// queues a ring all-reduce (Avg, chapter 04's) of it on the rank's progress
/// thread, storing the handle in state.work[b]. On a GPU the pack runs on the
/// compute stream and the ring on a communication stream that waits for it
/// (an event: the rank thread does not block); the bucket is final on the GPU
/// by the time state.work[b] completes. With --find-unused-parameters
/// the loop also calls mark_ready, after forward, for every parameter the
/// loss does not reach (find_unused_parameters, provided). Left out: views of
/// gradients into the bucket (we copy; see wait_and_unpack), re-bucketing
/// after the first step (DDP does).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch05 {

/// One bucket: parameter indices (into parameters()) in the order they were
/// added, and their total gradient bytes.
struct Bucket {
  std::vector<int> params;  ///< indices into parameters(), in fill order
  int64_t bytes = 0;        ///< sum of 4·numel over params
};

/// Buckets for parameters of `param_bytes[i]` bytes each (i in parameters()
/// order). Walk the parameters in REVERSE order (the order backward finishes
/// them). The current bucket's cap is `first_cap_bytes` for bucket 0 and
/// `cap_bytes` for the others. Before adding parameter p: if the bucket is not
/// empty and bytes + param_bytes[p] would exceed the cap, close it and start a
/// new one. After adding p: if bytes >= cap, close it. So a bucket never
/// exceeds its cap unless it holds a single parameter larger than the cap, and
/// cap 0 gives one bucket per parameter. Caps must be >= 0. Every parameter
/// lands in exactly one bucket; no bucket is empty. (Hole.)
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes,
                                   int64_t first_cap_bytes);

/// One step's bookkeeping on one rank.
struct BucketState {
  std::vector<Bucket> buckets;                ///< the layout (same on every rank)
  std::vector<int> bucket_of;                 ///< parameter → its bucket
  std::vector<bool> ready;                    ///< parameter → marked ready this step
  std::vector<int> missing;                   ///< bucket → parameters not ready yet
  int next_launch = 0;                        ///< lowest bucket index not launched yet
  std::vector<Tensor> flat;                   ///< bucket → its packed gradients (bytes/4,), on the rank's device
  std::vector<std::shared_ptr<Work>> work;    ///< bucket → its all-reduce, once launched
  std::function<void(int bucket)> launch;     ///< packs bucket b and starts its all-reduce
};

/// --find-unused-parameters (provided, not a hole): the indices of `params`
/// that the graph of `loss` does not reach, so backward will never fire their
/// grad-ready hooks. Each that has no gradient yet gets a zero one (one that
/// accumulated a gradient in an earlier micro-batch keeps it). Call it after
/// forward, before backward, and mark_ready each index: its bucket then
/// launches, carrying zeros for it, instead of never launching. What PyTorch
/// DDP's find_unused_parameters=True does, at the cost of a graph walk a step.
std::vector<int> find_unused_parameters(const Tensor& loss, std::vector<Tensor>& params);

/// A fresh state for `buckets` (provided): nothing ready, nothing launched;
/// state.flat[b] allocated on `device` (counted as comm buffers).
BucketState make_bucket_state(std::vector<Bucket> buckets, Device& device, std::function<void(int)> launch);
/// Forgets the last step (provided): nothing ready, nothing launched.
void reset_bucket_state(BucketState& state);

/// Parameter `param`'s gradient is final. Mark it ready (a parameter marked
/// twice in one step is a dpt::Error naming it: the hook fires once per
/// distinct parameter), count it off its bucket, then launch — by calling
/// state.launch(b) — every bucket that may go now: buckets go strictly in
/// index order, b = next_launch, next_launch+1, … while bucket b has no
/// missing parameter. A complete bucket behind an incomplete one waits its
/// turn, so every rank issues the same collectives in the same order. (Hole.)
void mark_ready(BucketState& state, int param);

/// Before the optimizer step: every bucket must have been launched, else
/// (after waiting for the buckets that did launch: they use state.flat) a
/// dpt::Error naming the first parameter that got no gradient and its bucket
/// ("parameter fc1.weight (#2) got no gradient this step; bucket 1 was never
/// all-reduced ..."), `names[i]` naming parameter i. Then wait for every
/// bucket's work, in index order, and copy state.flat[b] back into the
/// gradients of its parameters, in the bucket's fill order (device to device:
/// dpt::unflatten of a tensor, never a host loop). (Hole.)
void wait_and_unpack(BucketState& state, std::vector<Tensor>& grads, const std::vector<std::string>& names);

}  // namespace dpt::ch05
