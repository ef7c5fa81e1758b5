/// @file options.h
/// @brief Chapter 10's own flags (harness, not on the reading path): the
/// compressor of the flags' own run, the tour, the plot, and DiLoCo's outer
/// optimizer, with the checks that join them to the common flags (exit 2).
#pragma once

#include <cstdint>
#include <string>

#include "compressed_training.h"
#include "diloco.h"
#include "dpt/lecture.h"

namespace dpt::ch10 {

/// The flags of ch10_compression (defaults as printed by --help).
struct Ch10Flags {
  Setting mine{"sign", false};      ///< --compress, --error-feedback
  bool compare = true;              ///< --compare / --no-compare: the tour
  int64_t tour_rank = 2;            ///< --tour-rank: R of the tour's PowerSGD
  std::string plot;                 ///< --plot: accuracy against bytes (SVG)
  std::string mode = "compress";    ///< --mode compress | diloco
  Diloco diloco;                    ///< --inner-steps, --outer-lr, --outer-momentum
  int64_t equivalence_steps = 10;   ///< --equivalence-steps: the H = 1 law's run
};

/// The most rank threads ch10 runs: top-k and sign all-gather, so every rank
/// decodes n messages of Ψ entries, n²Ψ on one machine's cores (a sign step
/// at 256 threads: 69 s, past the deadlock timeout). Under mpirun, no limit.
constexpr int kMaxThreadRanks = 64;

/// The largest --outer-lr: at μ = 0 the outer step is θ₀ + η(mean θ_r − θ₀);
/// η = 2 reflects θ₀ through the ranks' mean, and beyond it each round lands
/// farther past the mean than it started: it diverges where averaging converges.
constexpr double kMaxOuterLr = 2;

/// Registers the flags on `app` (ChapterFlags); `options` joins the checks
/// that need --model and --steps.
void add_ch10_flags(CLI::App& app, Options& options, Ch10Flags& flags);

}  // namespace dpt::ch10
