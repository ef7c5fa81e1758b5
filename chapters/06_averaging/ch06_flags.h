/// @file ch06_flags.h
/// @brief Chapter 06's own flags (provided, not a hole): what the tour trains
/// beside the common flags' setting. Every rank must give the same ones (the
/// harness checks).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "ch06.h"

namespace dpt::ch06 {

/// What chapter 06's flags asked for.
struct Ch06Flags {
  std::string average = "params";  ///< --average grads|params
  /// --every 4, --warmup-steps 2: post-local SGD, so the bare run shows where
  /// local steps are counted from (at W = 0, or W a multiple of H, counting from
  /// step 0 averages at the same steps).
  Schedule schedule{true, 4, 2, false};
  bool compare = true;             ///< --compare: H = 1 for sgd, momentum, adam
  float adam_lr = 1e-3f;           ///< --adam-lr
  int64_t equivalence_steps = 10;  ///< --equivalence-steps
};

/// Registers --average, --every, --warmup-steps, --average-state, --compare,
/// --adam-lr and --equivalence-steps into `flags`, with their bounds.
void add_ch06_flags(CLI::App& app, Ch06Flags& flags);

}  // namespace dpt::ch06
