/// @file kink_allowance.h
/// @brief How far float rounding can move an MLP's gradient through ReLU
/// units that sit on their kink — what the step check must allow, and only that.
///
/// Two runs that compute the same pre-activation z = a·wᵀ + b in another
/// summation order (cuBLAS at a rank's batch of 32, Eigen at the global 128)
/// get z's that differ in their last bits. Where z is within that rounding of
/// 0, one run's ReLU may pass the unit and the other's block it. The forward
/// hardly moves (ReLU is continuous: both outputs are ~0), but the backward
/// does: the unit's gradient dz = da·relu′(z) is da in one run and 0 in the
/// other, so that sample's whole contribution through the unit — to the
/// unit's weight row, its bias and every layer below — appears in one
/// gradient and not the other: O(1/B) of a per-sample term, far above
/// rounding. A mistake (a sum for a mean, a dropped shard) moves every entry;
/// a kink moves only the entries below its unit.
///
/// kink_allowance() bounds that, from one device's forward alone (never from
/// the gradient it will judge):
///   1. forward in double, with a bound e on |z_run − z_exact| for any
///      summation order: γ_K·(|a|·|W|ᵀ + |b|) (Higham's γ_K = K·u/(1 − K·u),
///      u = 2⁻²⁴, K = fan-in + 1) plus the inputs' own bound carried through
///      |W|; a unit is on its kink when |z_exact| ≤ e (only then can two runs
///      disagree on its sign);
///   2. backward, carrying D ≥ |dz_run1 − dz_run2|: 0 at the logits; at a
///      kink |da| + the carried bound, elsewhere the carried bound where the
///      unit passes; each layer's weight entries may then move by Dᵀ·|a| and
///      its bias by Σ D.
/// The last layer never gets an allowance: a mistake shows there in full.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"

namespace dpt {

/// What the kinks of one batch allow, entry by entry.
struct KinkAllowance {
  std::vector<float> bound;  ///< per parameter entry, flattened in parameters() order: max |Δg| the kinks can cause
  int64_t units = 0;         ///< (sample, unit) pairs whose pre-activation is within rounding of 0
  int64_t samples = 0;       ///< samples with at least one such unit
};

/// The allowance for the gradient of mean softmax-cross-entropy of `model`
/// (weights on the host) on `batch` (x on the host, (B, in)). Runs in double.
/// A model with batch norm gets a zero bound: the bound is derived for
/// Linear → ReLU layers only, so with batch norm the step check judges the
/// raw difference.
KinkAllowance kink_allowance(const MLP& model, const Batch& batch);

}  // namespace dpt
