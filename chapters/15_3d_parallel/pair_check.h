/// @file pair_check.h
/// @brief The bare run's verdict on sequence parallelism's conjugate pair
/// (ch15.h: gather_sequence, scatter_sequence), on small integer tensors
/// whose every entry says where it belongs, so the sums are exact.
#pragma once

#include <string>

#include "dpt/comm.h"
#include "dpt/device.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"

namespace dpt::ch15 {

/// What the pair did on one small case, pass by pass: [0] gather_sequence
/// forward, [1] its backward, [2] scatter_sequence forward, [3] its backward.
struct PairFindings {
  double gap[4] = {0, 0, 0, 0};                  ///< largest |got − expected| (NaN: wrong shape or missing)
  bool traffic_ok[4] = {true, true, true, true};  ///< the pass's one collective, of the contract's size, no other
  std::string traffic[4];                         ///< what the traffic log showed, in words
};

/// Collective over `group` (tp ranks): runs gather_sequence and
/// scatter_sequence forward and backward on B = 2 sequences of 2·tp
/// positions of width 3, against answers indexed here (every entry an
/// integer), and their collectives against the contracts' from the group's
/// traffic log.
PairFindings check_sequence_pair(Communicator& group, Device& device);

/// Collective over the world: each rank's findings, the worst judged on
/// rank 0, one verdict per op and pass (values exact; the pass's collective
/// as the contract says). True on every rank when all four held.
bool add_pair_verdicts(Context& ctx, Verdicts& v, const PairFindings& mine);

}  // namespace dpt::ch15
