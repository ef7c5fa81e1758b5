/// @file zero_mixed.h
/// @brief Mixed precision under ZeRO (provided, not a hole): N thread ranks
/// train a few steps with 16-bit weights and gradients, an fp32 master copy
/// and the optimizer's moments, each rank keeping what ZeRO stage 0–3 keeps,
/// and the device ledger (dpt/memory_ledger.h) counts every rank's model
/// states; the formula (dpt/zero_formula.h) predicts them.
///
/// Per parameter with Adam: 2 bytes of weight, 2 of gradient, 12 of fp32
/// master, m and v (K = 12 in the ZeRO paper). Per rank:
///   stage 0: 2Ψ + 2Ψ + 12Ψ      stage 1: 2Ψ + 2Ψ + 12Ψ/N
///   stage 2: 2Ψ + (2 + 12)Ψ/N   stage 3: (2 + 2 + 12)Ψ/N
/// What a divided category holds is a shard of S = ⌈Ψ/N⌉ values of one flat
/// buffer padded to N·S (chapter 07's layout): the padding, S − Ψ/N values
/// per divided category, is the named extra.
///
/// A step, rank r (the library's collectives; chapter 07 built them):
///   stage 3: all-gather the 16-bit weight shards into the model (a buffer
///            that lives for the step); forward and backward of scale · loss
///            on r's part of the global batch, gradients stored in 16 bits;
///   all ranks agree whether any gradient overflowed (max of a flag): if so,
///            every rank skips the step;
///   stages 0–1: all-reduce the gradients (sum in fp32, ÷ N, stored in 16
///            bits) — every rank keeps all of them; stages 2–3: reduce-scatter
///            them into r's shard and let the full gradients go;
///   your master_step on r's part (all of it at stage 0, its shard at 1–3);
///   stages 1–2: all-gather the updated 16-bit shards into every rank's weights.
/// Model states are measured between steps, after the last one: the buffers a
/// step gathers or sums into are gone by then (their peak is shown, not judged).
///
/// Left out: fp32 runs (chapter 07 measures them), reducing bucket by bucket
/// during backward and gathering layer by layer (chapter 07 does), the
/// traffic, and the weights against stage 0's.
#pragma once

#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "dpt/zero_formula.h"
#include "mixed_training.h"

namespace dpt::ch11 {

/// One stage's run over N ranks.
struct ZeroMixedRun {
  int stage = 0;                      ///< 0 … 3
  int world = 1;                      ///< N
  int64_t psi = 0;                    ///< Ψ
  int64_t shard = 0;                  ///< S = ⌈Ψ/N⌉
  int64_t steps_taken = 0;            ///< optimizer steps (skipped ones not counted)
  std::vector<StateBytes> measured;   ///< per rank: the ledger's model states, params and grads at the format's width
  std::vector<double> comm_peak;      ///< per rank: the step's transient buffers at their peak (float32 storage)
};

/// Trains at `stage` on `world` thread ranks (16-bit `setting.precision`,
/// its scaler) until two steps were taken (at most 30 tries), from the flags'
/// model, and measures every rank. `device` "cpu" (rank r on cpu:r) or
/// "cuda" (every rank on the one GPU, each on its own ledger account, as
/// chapter 07's). Throws dpt::Error for fp32.
ZeroMixedRun train_zero_mixed(const Options& o, const Dataset& data, const Setting& setting, int stage, int world,
                              const std::string& device = "cpu");

/// Prints the table of `runs` (formula, padding, predicted, measured per
/// rank) and adds one verdict per stage and category: each rank's measured
/// bytes = zero_state_bytes(stage, width, Ψ, S) (the formula on Ψ/N, plus
/// the padding) to the byte. `width` is the formula's bytes per parameter
/// (formula_bytes of mixed_training.h); `p` names the format.
void report_zero_memory(const std::vector<ZeroMixedRun>& runs, const StateBytes& width, Precision p,
                        const Narrator& say, Verdicts& v);

}  // namespace dpt::ch11
