/// @file diloco_check.h
/// @brief Harness, not on the chapter's reading path: the check behind the
/// verdict on ch10::diloco_outer_step. It runs the hole on known inputs and
/// holds it to a law stated with the core's own optimizer (optim.h), not to
/// a formula of its own: fed the same gradients from the same start, SGD
/// with Nesterov momentum μ moves the parameters by plain SGD's move plus
/// μ times momentum SGD's move (what the hole keeps in `momentum` is its
/// own business). The tests keep their own oracle (tests/test_ch10_diloco.cpp).
#pragma once

#include <cstdint>

#include "diloco.h"

namespace dpt::ch10 {

/// Collective: three outer steps at `diloco`'s lr and momentum, each on
/// random per-rank parameters around where the last one ended (64 entries;
/// rank r's from seed + r), so every step's Δ = θ₀ − mean θ_r is known in
/// advance. The same Δs drive two dpt::SGD from the first θ₀: plain (lr)
/// and momentum (lr, μ). Returns max |θ − (θ_sgd + μ (θ_mom − θ_start))|
/// over the three steps, relative to the largest parameter. NaN when the
/// hole is not written.
double diloco_outer_error(Communicator& comm, const Diloco& diloco, uint64_t seed);

}  // namespace dpt::ch10
