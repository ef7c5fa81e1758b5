/// @file diloco_check.h
/// @brief Harness, not on the chapter's reading path: the check behind the
/// verdict on ch10::diloco_outer_step. It runs the hole on known inputs
/// against an oracle of its own, a serial simulation of PyTorch's
/// SGD(nesterov=True) in double — which is the hole's answer written out,
/// so reading it is reading the solution. The tests keep their own oracle
/// (tests/test_ch10_diloco.cpp).
#pragma once

#include <cstdint>

#include "diloco.h"

namespace dpt::ch10 {

/// Collective: three outer steps at `diloco`'s lr and momentum on random
/// per-rank parameters around a θ₀ of 64 entries (rank r's from seed + r),
/// against PyTorch's SGD(nesterov=True) on θ₀ − mean θ_r simulated here in
/// double: the largest |difference| relative to the largest parameter. NaN
/// when the hole is not written.
double diloco_outer_error(Communicator& comm, const Diloco& diloco, uint64_t seed);

}  // namespace dpt::ch10
