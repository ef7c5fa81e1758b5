/// @file ch06.h
/// @brief Chapter 06's holes, specified here once: averaging tensors across
/// ranks, and local SGD's step after backward, which decides when to average
/// what (gradients, parameters, optimizer state).
///
/// Fill them in `exercises/06_averaging/`; tiered hints are in \ref ch06_hints.
/// `ctest --preset student -L ch06` checks them against a serial mean, a
/// serial simulation of every replica, one device, and the traffic log
/// (threads and mpirun).
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/optim.h"
#include "dpt/tensor.h"

namespace dpt::ch06 {

/// What one step sent.
enum class Averaging {
  Gradients,   ///< gradients were averaged before the optimizer step
  Parameters,  ///< parameters were averaged after the optimizer step
  None,        ///< nothing was sent: the replicas trained apart
};

/// Local SGD's flags: --every, --warmup-steps, --average-state.
struct Schedule {
  bool parameters = false;     ///< false: --average grads (every step); true: --average params
  int64_t every = 1;           ///< H >= 1: --every
  int64_t warmup = 0;          ///< W >= 0: --warmup-steps
  bool average_state = false;  ///< --average-state: the optimizer state is averaged with the parameters
};

/// Collective: every rank calls it with the same number of tensors, of the
/// same shapes in the same order, all on one device.
///
/// Postconditions:
///  - every element of every rank's `tensors` (the caller's handles see it)
///    holds the mean over ranks of that element, with the bits the library's
///    `ReduceOp::Avg` gives, and every rank holds the same bits;
///  - the traffic log sees one averaging, not one per tensor: Σ numel · 4
///    bytes per rank in a single collective call, whatever the number of
///    tensors (every call pays the link's latency once; a step with a hundred
///    small tensors must not pay it a hundred times).
/// (Hole: exercises/06_averaging/average.cpp.)
void average_parameters(Communicator& comm, std::vector<Tensor>& tensors);

/// Collective (every rank calls it with the same schedule and step): the rest
/// of training step `step` (0-based) after this rank's backward, under
/// --average params. On entry each parameter's grad() holds this rank's
/// gradient on its own shard; `optimizer` updates `params`. Returns what the
/// step sent.
///
/// Postconditions, with W = schedule.warmup and H = schedule.every:
///  - Steps 0 … W−1 (post-local SGD's warm-up) train exactly as gradient
///    averaging does: each is one optimizer step on the mean gradient over
///    ranks, and the replicas stay identical.
///  - From step W on, each rank's optimizer steps on its own gradient, and
///    the parameters are averaged once every H of these local steps, so
///    that a run of W + k·H steps (k ≥ 1) ends with identical replicas,
///    averaged exactly k times. No other step sends anything.
///  - Right after an averaging every rank holds the same parameters, bit for
///    bit. The optimizer state (optimizer.state_tensors()) is averaged with
///    them when schedule.average_state, to the same bits on every rank;
///    otherwise each rank keeps its own. It is never reset.
///  - Everything sent goes through average_parameters.
/// (Hole: exercises/06_averaging/local_step.cpp.)
Averaging local_sgd_step(Communicator& comm, const Schedule& schedule, int64_t step, std::vector<Tensor>& params,
                         Optimizer& optimizer);

}  // namespace dpt::ch06
