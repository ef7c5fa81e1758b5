/// @file zero_formula.h
/// @brief The ZeRO paper's model-state bytes per rank, by category: what
/// each stage keeps in full and what it divides among the N ranks. Chapter
/// 07 applies it to fp32 Adam (4 + 4 + 8 bytes per parameter), chapter 11 to
/// mixed precision (2 + 2 + 12: 16-bit weights and gradients, fp32 master
/// copy and Adam's m and v).
///
///     stage 0: nothing divided                   e.g. 16Ψ       (2+2+12)
///     stage 1: optimizer state divided           2Ψ + 2Ψ + 12Ψ/N = 4Ψ + 12Ψ/N
///     stage 2: gradients too                     2Ψ + 14Ψ/N
///     stage 3: weights too                       16Ψ/N
///
/// Left out: activations, buffers, padding (the callers name them as extras).
#pragma once

#include <string>

namespace dpt {

/// Bytes per parameter of each model state (or bytes per rank, by category).
struct StateBytes {
  double params = 0;  ///< the weights forward reads
  double grads = 0;   ///< their gradients
  double state = 0;   ///< the optimizer's: moments, and an fp32 master copy where the weights are 16-bit
  /// params + grads + state.
  double total() const { return params + grads + state; }
};

/// Model-state bytes per rank at ZeRO `stage` (0 … 3), by category: each
/// category `width` × `full` where the stage keeps it whole, `width` ×
/// `shard` where it divides it (stage ≥ 1: state, ≥ 2: grads, 3: params).
/// With full = Ψ and shard = Ψ/N it is the paper's formula.
StateBytes zero_state_bytes(int stage, const StateBytes& width, double full, double shard);

/// The formula as text, from the widths: "16Ψ", "8Ψ + 8Ψ/N", "4Ψ + 12Ψ/N",
/// "16Ψ/N" for 4 + 4 + 8; "4Ψ + 12Ψ/N" at stage 1 for 2 + 2 + 12.
std::string zero_formula_text(int stage, const StateBytes& width);

}  // namespace dpt
