/// @file ch06.h
/// @brief Chapter 06's exercises, specified here once: averaging parameters
/// across ranks, and the schedule that says when (every H steps, after W
/// warm-up steps of gradient averaging). Fill them in
/// `exercises/06_averaging/` (hints there); `ctest --preset student -L ch06`
/// checks the schedule against a list written out by hand, parameter
/// averaging against a serial mean, and training with both against gradient
/// averaging and one device (threads and mpirun).
///
/// Steps are 0-based optimizer steps. In every step each rank runs forward and
/// backward on its shard; then, depending on averaging_at(schedule, step):
///  - Gradients: gradients are averaged (all-reduce, Avg) before the optimizer step;
///  - Parameters: the optimizer steps on the local gradient, then the
///    parameters (and, with --average-state, the optimizer state) are averaged;
///  - None: the optimizer steps on the local gradient; nothing is sent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch06 {

/// What one step sends.
enum class Averaging {
  Gradients,   ///< average gradients before the optimizer step
  Parameters,  ///< average parameters after the optimizer step
  None,        ///< send nothing: replicas train apart
};

/// When to average: the flags --average, --every, --warmup-steps.
struct Schedule {
  bool parameters = false;  ///< false: --average grads (every step); true: --average params
  int64_t every = 1;        ///< H >= 1: parameters are averaged once every H steps
  int64_t warmup = 0;       ///< W >= 0: steps 0 … W−1 average gradients first (post-local SGD)
};

/// What step `step` (>= 0) does under `schedule`:
///  - --average grads: Gradients, every step;
///  - --average params: Gradients for steps 0 … W−1; from step W on, the
///    parameters are averaged after the H-th local step, the 2H-th, …, i.e.
///    Parameters when (step − W + 1) is a multiple of H, None otherwise.
/// With H = 1 and W = 0 every step is Parameters.
/// (Hole: exercises/06_averaging/schedule.cpp.)
Averaging averaging_at(const Schedule& schedule, int64_t step);

/// Collective: replaces every rank's `tensors` (any devices) by their mean
/// over ranks, element by element, with the library all-reduce (Avg) of all
/// of them flattened into one payload on their device (a GPU buffer under
/// --device cuda), one call per use, so the traffic log counts Σ numel · 4
/// bytes per rank. Afterwards every rank holds the same bits.
/// (Hole: exercises/06_averaging/average.cpp.)
void average_parameters(Communicator& comm, std::vector<Tensor>& tensors);

}  // namespace dpt::ch06
