/// @file ring_step.h
/// @brief The step's gradient all-reduce as chapter 04's ring, built from
/// sendrecv (provided, for --ring): where a rank that dies mid-collective
/// leaves some members with the whole sum and others with none.
#pragma once

#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt::ch16 {

/// Sums `data` over every rank of `comm` by a ring (scatter-reduce, then
/// all-gather; chunk c reduced in ring order, so every rank gets the same
/// bits). With `die_in_last_hop` this rank sends its last chunk but never
/// receives its own: its downstream neighbours complete, its upstream one
/// waits (a bounded wait) for a receive that never comes. Returns false then.
bool ring_all_reduce(Communicator& comm, std::vector<float>& data, bool die_in_last_hop);

}  // namespace dpt::ch16
