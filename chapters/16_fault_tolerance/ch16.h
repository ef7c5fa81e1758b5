/// @file ch16.h
/// @brief Chapter 16's hole, specified once: the end of a step as a
/// transaction across the quorum's group (exercises/16_fault_tolerance/commit.cpp).
#pragma once

#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt::ch16 {

/// What one member's step changes, flat: Ψ parameters and their Ψ momentum buffers.
struct Replica {
  std::vector<float> params;    ///< the parameters, flat
  std::vector<float> momentum;  ///< momentum SGD's buffers, same length
};

/// Momentum SGD (μ = 0.9) with the summed gradient `grad`: v ← μ·v + grad,
/// w ← w − lr·v, elementwise (provided).
void apply_momentum(Replica& replica, const std::vector<float>& grad, float lr);

/// The end of one step on one member of `group`, once `grad` holds the
/// gradient summed over every member; `fine` says whether this member can
/// stand behind the step (its own gradient was finite).
///
/// Postcondition — the step is a transaction over `group`:
///  - every member passed `fine` = true: returns true on every member, each
///    having applied `grad` to its replica once (apply_momentum);
///  - some member passed false: returns false on every member, no replica changed;
///  - some member never reaches this call (it crashed; the group is revoked,
///    or a call times out): the group's exception (PeerFailed, Timeout) passes
///    through on the others, and no replica has changed.
/// Each member calls it once per step, the same on every member.
bool commit_step(Communicator& group, Replica& replica, const std::vector<float>& grad, float lr, bool fine);

}  // namespace dpt::ch16
