/// @file ch03.h
/// @brief Chapter 03's exercises: naive data parallelism, written by you —
/// replicas that start from one master copy, a global batch cut into shards,
/// gradients averaged through the host (rank 0), and the step that ties them
/// together. Fill them in `exercises/03_naive_dp/`;
/// `ctest --preset student -L ch03` checks them against one device computing
/// serially and against the communicator's traffic log.
///
/// The goal of the whole chapter, which the step below must meet: N ranks,
/// each with a batch of M samples, train exactly as one device would with
/// one batch of N·M samples.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/tensor.h"

namespace dpt::ch03 {

/// The start. `master` is the master copy, on rank 0's host; every other rank
/// passes nullptr. `replica` is this rank's model on its own device, of the
/// master's architecture, initialised from a seed of its own.
/// Postcondition: every rank's `replica` holds the master copy's weights, bit
/// for bit. Collective: every rank calls it.
/// (Hole: exercises/03_naive_dp/replicate.cpp.)
void replicate_master(Communicator& comm, const MLP* master, MLP& replica);

/// Which samples of a step's global batch rank `rank` of `world` trains on.
/// Postconditions: every rank gets global.size() / world indices; over all
/// ranks, every entry of `global` is used exactly once (shards are disjoint
/// and together cover the batch); the answer depends on the arguments only.
/// Throws dpt::Error, saying both numbers, when global.size() does not divide
/// by world. (Hole: exercises/03_naive_dp/shard.cpp.)
std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world);

/// Averages gradients through the host. On entry each rank's `grads` (one
/// tensor per parameter, on the rank's device) hold its own gradients.
/// Postconditions: every rank's `grads`, still on its device, hold the mean
/// over ranks, the same bits on every rank. Rank 0 plays the host: every
/// message has rank 0 at one end, and no byte moves that the average does not
/// need (the tests count them). Collective.
/// (Hole: exercises/03_naive_dp/host_average.cpp.)
void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads);

/// One step of naive data parallelism, this rank's part. Every rank calls it
/// with the same `global_batch` (indices into `data`). Preconditions: every
/// rank's `replica` holds the same weights w; `optimizer` updates the
/// replica's parameters and is in the same state on every rank.
/// Postconditions:
///  - every rank's replica holds the weights one device would hold after one
///    `optimizer` step from w on the whole global batch (to float rounding),
///    and the replicas are bit-identical;
///  - every parameter's grad() holds the gradient that step applied;
///  - this rank read only the samples of its shard (shard_indices);
///  - the return value is the mean loss over this rank's shard at w.
/// The loss is softmax_cross_entropy of the replica's logits.
/// (Hole: exercises/03_naive_dp/step.cpp.)
float naive_data_parallel_step(Context& ctx, MLP& replica, Optimizer& optimizer, const Dataset& data,
                               const std::vector<int64_t>& global_batch);

// ----------------------------------------------------------------------------
// --batchnorm sync: batch norm over the global batch (sync_batch_norm.h
// hands these two to the model; docs/ch03_naive_dp.md, "Batch norm across ranks")

/// SyncBatchNorm's forward. `local` holds this rank's BatchMoments: per
/// column, the mean and the biased variance of its own rows, and their count
/// (ranks may hold different counts). Postcondition: returns, the same on
/// every rank, the BatchMoments of the concatenation of every rank's rows:
/// the mean and the biased variance per column that one device would compute
/// on all the rows at once (to float rounding), and the total count.
/// Collective. (Hole: exercises/03_naive_dp/sync_batch_norm.cpp.)
BatchMoments sync_batch_moments(Communicator& comm, const BatchMoments& local);

/// SyncBatchNorm's backward. On entry `sum_dy` and `sum_dy_xhat` (C each)
/// hold this rank's Σ over its rows of dy and of dy ⊙ x̂ (x̂ the normalized
/// input). Postcondition: both hold the sums over every rank's rows, the same
/// on every rank. Collective. (Hole: exercises/03_naive_dp/sync_batch_norm.cpp.)
void sync_gradient_sums(Communicator& comm, Tensor& sum_dy, Tensor& sum_dy_xhat);

}  // namespace dpt::ch03
