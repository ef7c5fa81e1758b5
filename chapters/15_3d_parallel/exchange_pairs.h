/// @file exchange_pairs.h
/// @brief The two ExchangePair values (ch15.h) a split block runs on:
/// chapter 12's f and g (tensor parallelism: every rank holds the whole
/// activation) and sequence parallelism's gather_sequence and
/// scatter_sequence (rank t holds its positions). Both are the student's:
/// chapter 12's holes and this chapter's.
#pragma once

#include <cstdint>

#include "ch15.h"
#include "dpt/comm.h"

namespace dpt::ch15 {

/// {ch12::copy_to_tp_region, ch12::reduce_from_tp_region} over `group`
/// (which must outlive the pair and the graph built with it).
ExchangePair tensor_parallel_pair(Communicator& group);

/// {gather_sequence, scatter_sequence} over `group`, for `batch` sequences.
ExchangePair sequence_parallel_pair(Communicator& group, int64_t batch);

}  // namespace dpt::ch15
