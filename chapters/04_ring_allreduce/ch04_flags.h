/// @file ch04_flags.h
/// @brief Chapter 04's own flags (provided, not a hole): the drawing, the
/// size of the sum checks, and the timing table's sizes and repetitions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace dpt::ch04 {

/// What chapter 04's flags asked for.
struct Ch04Flags {
  bool explain = true;           ///< --explain: draw the ring step by step (up to 8 ranks)
  int64_t check_size = 1000003;  ///< --check-size: floats in the sum and traffic checks
  int64_t max_bytes = 16 << 20;  ///< --max-bytes: largest all-reduce timed
  int reps = 5;                  ///< --reps: timed repetitions per size (median)
};

/// Registers --explain/--no-explain, --check-size, --max-bytes and --reps
/// into `flags`, each bounded (a bad value is one line and exit 2).
void add_ch04_flags(CLI::App& app, Ch04Flags& flags);

}  // namespace dpt::ch04
