/// @file zero_report.h
/// @brief What chapter 07 prints next to its measurements: the ZeRO paper's
/// formulas for memory and traffic per rank, the named extras they leave out,
/// and the verdicts that compare the two (provided, not a hole).
///
/// Formulas (fp32 Adam: 4 bytes of parameter, 4 of gradient, 8 of m and v per
/// parameter; Ψ parameters, N ranks), model states per rank:
///   stage 0: 16Ψ   stage 1: 8Ψ + 8Ψ/N   stage 2: 4Ψ + 12Ψ/N   stage 3: 16Ψ/N
/// Bytes each rank sends per step: 2Ψ·4·(N−1)/N for stages 0–2 (a
/// reduce-scatter and an all-gather), 3Ψ·4·(N−1)/N for stage 3 (an all-gather
/// more: parameters are gathered for forward and again for backward).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ch07.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"
#include "zero_engine.h"

namespace dpt::ch07 {

/// Model-state bytes per rank by the formula for `stage` (psi parameters, n ranks).
double formula_bytes(int stage, double psi, int n);
/// The formula as text: "16Ψ", "8Ψ + 8Ψ/N", "4Ψ + 12Ψ/N", "16Ψ/N".
std::string formula_text(int stage);
/// Bytes each rank sends per step by theory for `stage`.
double theory_bytes_per_step(int stage, double psi, int n);
/// Model-state bytes per rank this implementation holds: the formula on the
/// padded buffer (N·S instead of Ψ where a full copy is kept, S for a shard).
double padded_state_bytes(int stage, const Partition& part);

/// Comm-buffer bytes a rank needs at most, by the stage's own rule — never
/// measured: none at stages 0–1 (a bucket is a view of the full gradient
/// buffer); the largest bucket at stage 2; at stage 3 that plus the largest
/// gathered layer (the two largest with --prefetch, one in use and the next
/// in flight).
double comm_formula_bytes(int stage, bool prefetch, const std::vector<Range>& layers,
                          const std::vector<LayerBucket>& buckets);

/// Collective. Prints (rank 0) rank 0's memory by category next to the formula
/// and its named extras, and adds three verdicts over every rank (the worst
/// rank's): the model states at the peak are the formula's on the padded
/// buffer; the comm buffers' own peak is at most comm_formula_bytes and, at
/// stage 3, at least what a layer's backward holds at once (its bucket and
/// the layer itself, gathered: a gathered layer charged elsewhere shows); the
/// peak is at most 5 % above formula + padding + activations + other +
/// comm_formula_bytes. Every "expected" figure comes from a formula, never
/// from the quantity judged.
void report_memory(Context& ctx, const ZeroRun& run, const Partition& part, int stage, bool prefetch, Verdicts& v,
                   bool print);

/// Rank 0: prints bytes sent per rank per step next to theory and adds the
/// verdicts "ring only" and "bytes = theory" (within the padding's share);
/// on one rank, that they cannot fail.
void report_traffic(const ZeroRun& run, const Partition& part, int stage, Verdicts& v, bool print);

/// Collective: the run as JSON (complete on rank 0): stage, world, psi,
/// padded, formula_bytes, padded_state_bytes, comm_formula_bytes,
/// theory_bytes_per_step, and per rank {rank, peak_total, at_peak{category:
/// bytes}, peak{…}, sent_per_step}. What --report-json writes and
/// scripts/plot_ch07.py draws.
nlohmann::json run_json(Context& ctx, const ZeroRun& run, const Partition& part, int stage, bool prefetch);

/// Rank 0: on_bucket_ready on a probe bucket of small integers (their sum is
/// exact in any order) at every stage, on a threads world of its own, 3 ranks
/// whatever the run's N (a power of two hides a mean taken another way); the
/// verdict: each rank's part holds the sum divided by N once, to the bit, each
/// rank sent what its stage needs (a reduce-scatter; stage 0 an all-gather
/// more) and no more, and stages 2-3 let the bucket go. Training cannot show a
/// mean taken another way, and a run shows only its own stage's branch.
void check_bucket_mean(Verdicts& verdicts);

/// Rank 0: partition_parameters on the run's Ψ and on Ψ+1 … Ψ+N−1 over the
/// same N (every remainder mod N, so a rule that pads where it need not shows
/// whatever N the run has); the verdict: every parameter in exactly one of N
/// equal shards, and no equal-shard cut pads less.
void check_partition(const Partition& run, Verdicts& verdicts);

/// For an out-of-memory message at `stage`: the formula per stage against
/// `capacity` bytes, and the stage to run instead ("run with --stage 2").
std::string which_stage_fits(const Partition& part, int stage, double capacity);

}  // namespace dpt::ch07
