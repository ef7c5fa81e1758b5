/// @file checks.h
/// @brief Chapter 10's verdicts (harness, not on the reading path), each
/// computed from the lecture's numbers against a stated tolerance. On one
/// rank, a verdict about what ranks share cannot fail and says so.
#pragma once

#include <string>
#include <vector>

#include "bytes_and_plot.h"
#include "compressed_training.h"
#include "diloco.h"
#include "dpt/lecture.h"

namespace dpt::ch10 {

/// PowerSGD at full rank must reproduce the mean to this, relative to its
/// largest entry: products of up to 784 float terms and a Gram-Schmidt,
/// ~1e-5 measured; a basis that differs between ranks is off by O(1).
constexpr double kFullRankTolerance = 1e-4;

/// Top-k's decode against its serial mean, relative: the same float sums in
/// another order, ~1e-7; a misplaced, overwritten or undivided pair is O(1).
constexpr double kDecodeTolerance = 1e-5;

/// PowerSGD's factors: approxᵀ approx against q qᵀ, relative to its largest
/// entry. Equal when approx = P qᵀ with PᵀP = I; float rounding of the
/// products and of P's orthonormality, 2.9e-7 measured on the default
/// model's shapes at full rank; a q that is not approx's factor (not
/// transposed back, or left as it came) is off by O(1).
constexpr double kFactorTolerance = 1e-5;

/// The compressed runs' verdicts: bytes = formula, error feedback's
/// invariant, identical replicas, every hole written, every loss finite; then
/// the holes on known inputs (top-k's decode, PowerSGD at full rank and its
/// factors), each "not written yet" when its probe met an unwritten hole.
void compression_verdicts(Verdicts& v, const std::vector<CompressedRun>& runs, const std::vector<Shape>& shapes,
                          int world, const HoleProbe& decode, const HoleProbe& full_rank);

/// Rank 0's summary rows: held-out accuracy without → with error feedback.
void feedback_summary(Table& summary, const std::vector<CompressedRun>& runs);

/// What DiLoCo's laws measured (diloco_laws in the lecture).
struct DilocoLaws {
  bool written = true;     ///< false: the outer-step hole is not written yet
  double outer = 0;        ///< the outer step on known inputs against SGD-with-momentum trajectories (diloco_check.h)
  double gap = 0;          ///< H = 1, lr 1, μ 0 against data parallelism: max |w − w_dp|
  int64_t steps = 0;       ///< steps of that comparison
};

/// DiLoCo's laws: the outer step on known inputs, and H = 1 at lr 1, μ 0
/// = data parallelism for an inner step linear in g (sgd, momentum), not
/// for adam/adamw.
void diloco_law_verdicts(Verdicts& v, const DilocoLaws& laws, const std::string& optimizer, int world);

/// --mode diloco's run: bytes = 4Ψ per outer step, replicas identical after it.
void diloco_run_verdicts(Verdicts& v, const DilocoRun& run, const Diloco& d, int64_t psi, int64_t steps, int world);

/// All-reduce bytes per rank in `traffic`, less the loop's loss (4 bytes a step).
double allreduce_bytes(const TrafficLog& traffic, int64_t steps);

}  // namespace dpt::ch10
