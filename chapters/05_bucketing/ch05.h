/// @file ch05.h
/// @brief Chapter 05's exercises, specified here once: the reducer that
/// all-reduces gradients in buckets while backward still runs. Fill them in
/// `exercises/05_bucketing/bucketing.cpp`; `ctest --preset student -L ch05`
/// checks them, and the chapter page's Hints (\ref ch05_hints) help, one tier
/// at a time.
///
/// The life of one step (the chapter's provided code around your holes):
///
///     BucketState state = make_bucket_state(assign_buckets(bytes, cap, first_cap), ctx.device, launch);
///     // backward: each parameter's grad-ready hook, once its gradient is final:
///     mark_ready(state, p);           // you decide which buckets to launch(b) now
///     // after backward, before the optimizer step:
///     wait_and_unpack(state, grads, names);
///
/// `launch(b)` (provided) copies bucket b's gradients, in the bucket's fill
/// order, into state.flat[b] and queues an all-reduce (Avg, chapter 04's
/// ring) of it on the rank's progress thread, storing its handle in
/// state.work[b]; it returns at once. The progress thread runs one rank's
/// queued work in the order it was queued, and a ring is a collective: the
/// k-th all-reduce a rank queues runs against the k-th all-reduce of every
/// other rank, whichever buckets those are. With --find-unused-parameters the
/// loop also calls mark_ready, after forward, for every parameter the loss does
/// not reach (find_unused_parameters, provided). Left out: views of gradients
/// into the bucket (we copy), re-bucketing after the first step (DDP does).
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

/// The bucket layout for parameters of `param_bytes[i]` > 0 bytes each (i in
/// parameters() order, which lists a model from its input layer to its output
/// layer). Bucket 0's cap is `first_cap_bytes`, every other bucket's
/// `cap_bytes`. Postconditions:
///  - read bucket by bucket, each bucket's params in order, the layout lists
///    every parameter exactly once, in reverse parameters() order: the order
///    backward is expected to make their gradients final, output layer first;
///    each bucket's `bytes` is the sum over its params;
///  - no bucket is empty, and none holds more bytes than its cap unless it
///    holds a single parameter (one larger than the cap);
///  - of all layouts that keep the two rules above, it is the one with the
///    most parameters in bucket 0, then the most in bucket 1, and so on: the
///    buckets backward completes first are as large as their caps let them
///    be. (Cap 0: one bucket per parameter.)
/// A negative cap is a dpt::Error naming it. (Hole.)
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes,
                                   int64_t first_cap_bytes);

/// One step's bookkeeping on one rank. make_bucket_state fills the layout
/// fields; reset_bucket_state clears the per-step ones before each step.
struct BucketState {
  std::vector<Bucket> buckets;              ///< the layout (the same on every rank)
  std::vector<int> bucket_of;               ///< parameter → its bucket
  std::vector<bool> ready;                  ///< parameter → marked ready this step (all false at reset)
  std::vector<bool> launched;               ///< bucket → launched this step (all false at reset)
  std::vector<Tensor> flat;                 ///< bucket → its packed gradients (bytes/4,), on the rank's device
  std::vector<std::shared_ptr<Work>> work;  ///< bucket → its all-reduce once launched; before that a
                                            ///< placeholder whose wait() throws (no rank would ever run it)
  std::function<void(int bucket)> launch;   ///< packs bucket b and queues its all-reduce (sets work[b], not launched[b])
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
/// Forgets the last step (provided): nothing ready, nothing launched, every
/// work[b] a placeholder again.
void reset_bucket_state(BucketState& state);

/// Parameter `param`'s gradient is final for this step (its grad-ready hook
/// fired). Hooks fire once per parameter per step, in an order you do not
/// control and that need not be the same on two ranks, nor from one step to
/// the next. Contract, over one step on one rank:
///  - state.launch(b) is called exactly once for every bucket, and never
///    before every parameter of bucket b has been marked ready;
///  - every rank all-reduces the same bucket in its k-th all-reduce, for every
///    k, whatever order its own hooks fire in (see the file comment);
///  - when mark_ready returns, no bucket is left waiting that these two rules
///    would allow to go now: communication starts as early as it safely can.
/// Marking a parameter that is already ready this step, or one that does not
/// exist, is a dpt::Error naming it ("parameter #3 ..."). (Hole.)
void mark_ready(BucketState& state, int param);

/// Before the optimizer step. Postconditions, on a normal return: every
/// bucket's all-reduce has finished, and every parameter's gradient
/// (`grads[i]` for parameter i) holds its slice of its bucket's averaged
/// state.flat[b], which launch laid out as the bucket's parameters in fill
/// order. Copy on the rank's device (a tensor operation, never a loop over
/// host floats). If a bucket was never launched this step: a dpt::Error, not
/// a hang, whose message names the first parameter (in layout order) never
/// marked ready, by `names[i]`, and its bucket (as "bucket b"); when it is
/// raised, every bucket that did launch on this rank has finished. (Hole.)
void wait_and_unpack(BucketState& state, std::vector<Tensor>& grads, const std::vector<std::string>& names);

}  // namespace dpt::ch05
