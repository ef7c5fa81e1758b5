/// @file ch10.h
/// @brief Chapter 10's holes, specified here once: error feedback around any
/// compressor, top-k's reconstruction from the all-gathered pairs, one
/// round of PowerSGD, and DiLoCo's outer step.
///
/// Fill them in `exercises/10_compression/`; tiered hints are in \ref ch10_hints.
/// `ctest --preset student -L ch10` checks them against serial sums written
/// out in the tests, the bits of known matrices, and the traffic log.
#pragma once

#include <cstdint>
#include <vector>

#include "compressor.h"
#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch10 {

/// Collective (every rank calls it once per step with the same compressor
/// spec): one step of error feedback around `compressor`. On entry `grad`
/// (Ψ,) is this rank's gradient g of this step and `residual` (Ψ,) is what
/// this rank carried out of its last call (zeros before the first).
///
/// Postconditions:
///  - `grad` is the update every rank applies: the same bits on every rank,
///    the result of exactly one compressor.reduce call; nothing else is sent.
///  - `residual` is what this rank's part of that update left out, to be
///    sent with a later step. With d_t the `delivered` of this rank's reduce
///    call at step t, after every step T, on every rank:
///        Σ_{t≤T} d_t  +  residual_T  =  Σ_{t≤T} g_t
///    to float rounding: nothing this rank computed is lost, only delayed.
///    With the compressor `none` (it delivers everything) the residual is 0.
///    Averaged over ranks, the updates applied so far plus mean_r residual_T
///    are the sum of the mean gradients.
/// (Hole: exercises/10_compression/error_feedback.cpp.)
void error_feedback_step(Communicator& comm, Compressor& compressor, std::vector<float>& grad,
                         std::vector<float>& residual);

/// Top-k's decode (not collective). `gathered` is what an all_gather of every
/// rank's top-k message returns: (world, 2k) floats, row r from rank r, each
/// row k index words (index_word) then the k values, value j belonging to
/// index j. Row r stands for a dense vector x_r (Ψ,): the vector rank r
/// compressed, with every entry its message did not carry set to zero.
///
/// Postconditions: `mean` (Ψ,), whatever it held on entry, is the mean of
/// x_0 … x_{world−1}, to float rounding, on every one of its Ψ entries; the
/// same `gathered` decodes to the same bits wherever it is decoded. An
/// index outside 0…Ψ−1 throws dpt::Error.
/// (Hole: exercises/10_compression/topk.cpp.)
void topk_reconstruct(const std::vector<float>& gathered, int world, int64_t k, std::vector<float>& mean);

/// Collective: one round of PowerSGD on one weight matrix. `m` (rows, cols)
/// is this rank's matrix M_r; `q` (cols, R) is the warm start, the same bits
/// on every rank. Let M = mean_r M_r. The tensors are on the host.
///
/// Postconditions:
///  - `approx` (rows, cols) is M projected orthogonally onto an R-dimensional
///    column space: the one a step of power iteration on M from q_in finds
///    (the span of M · q_in, when that has rank R). It is returned as two
///    factors, approx = P qᵀ, where P (rows, R) has orthonormal columns
///    (PᵀP = I to float rounding) and `q` (cols, R) is what this round
///    leaves for the next one to start from; approx and q are the same
///    bits on every rank;
///  - M_r never travels, nor anything its size: only a P-sized and a
///    q-sized matrix do, R·(rows + cols) floats from this rank in all, each
///    through one library all_reduce (the traffic log counts them);
///  - at R = min(rows, cols) with M and q_in of full rank, approx = M to
///    float rounding (the compression loses nothing).
/// Requires 1 <= R <= min(rows, cols).
/// (Hole: exercises/10_compression/powersgd.cpp.)
void powersgd_round(Communicator& comm, const Tensor& m, Tensor& q, Tensor& approx);

/// Collective (every rank calls it after the same inner step): DiLoCo's
/// outer step. On entry `params` (Ψ,) is this rank's parameters after its H
/// inner steps, θ_r; `before` (Ψ,) is what every rank started those steps
/// from, θ₀ (the same bits on every rank); `momentum` (Ψ,) is yours: zeros
/// before the first outer step, and at every later one what your previous
/// outer step left in it (the loop hands it back untouched).
///
/// Postconditions:
///  - `params` is where SGD with Nesterov momentum (learning rate outer_lr,
///    momentum outer_momentum; the rule is on \ref ch10_diloco) has taken
///    the model after the outer steps so far, each round taken as one step
///    of one model — to float rounding; at outer_momentum = 0 each outer
///    step moves the model from θ₀ towards the ranks' mean, outer_lr of the
///    way (outer_lr = 1: onto the mean, chapter 06's parameter averaging;
///    below 1 short of it, above 1 past it);
///  - `params` and `momentum` hold the same bits on every rank;
///  - Ψ floats travel per rank, through the library's all_reduce, and nothing else.
/// (Hole: exercises/10_compression/diloco.cpp.)
void diloco_outer_step(Communicator& comm, std::vector<float>& params, const std::vector<float>& before,
                       std::vector<float>& momentum, float outer_lr, float outer_momentum);

}  // namespace dpt::ch10
