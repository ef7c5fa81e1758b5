/// @file ch03.h
/// @brief Chapter 03's exercises: shard a global batch across ranks, and
/// average gradients through the host (rank 0's CPU). Fill them in
/// `exercises/03_naive_dp/`; `ctest --preset student -L ch03` checks them
/// against a serial mean and the communicator's traffic log.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch03 {

/// Rank `rank`'s part of a global batch: the contiguous sub-slice
/// global[rank·M, (rank+1)·M) with M = global.size() / world. Throws
/// dpt::Error (saying both numbers) when global.size() does not divide by
/// world. (Hole: exercises/03_naive_dp/shard.cpp.)
std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world);

/// Naive gradient averaging through the host. On entry each rank's `grads`
/// (one tensor per parameter, on the rank's device) hold its local gradients;
/// on return every rank's `grads` hold the mean over ranks. The protocol:
/// every rank copies its gradients device → host and sends them to rank 0
/// (the host); rank 0 sums them in rank order, divides by the world size, and
/// sends the mean back; every rank copies it host → device.
/// (Hole: exercises/03_naive_dp/host_average.cpp.)
void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads);

}  // namespace dpt::ch03
