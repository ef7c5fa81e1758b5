/// @file lm_sweep.h
/// @brief Chapter 14's batch sweep (provided, not a hole): steps to a target
/// held-out loss in bits per character against the global batch, for the GPT.
/// The sweep (grid search, linear rule with warm-up, critical batch, verdicts,
/// tables, plot) is the harness's, dpt/batch_sweep.h, shared with chapter 02;
/// this file brings the GPT's run to the target, its rate grids and its flags.
///
/// One rank: a global batch is a global batch however many ranks share it
/// (the lesson's step check shows D ranks × B/D = one device × B), so the
/// sweep runs on one device. Minutes to tens of minutes: \ref ch14_sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/batch_sweep.h"
#include "dpt/cli_fwd.h"
#include "dpt/device.h"
#include "dpt/lecture.h"
#include "gpt.h"

/// The smallest batch (sequences per step) of the GPT's sweep.
constexpr int64_t kLmSweepMinBatch = 4;
/// Held-out windows each evaluation scores (spread over the held-out split,
/// the same every time: held_out_loss's): 64 × T characters.
constexpr int64_t kLmSweepEvalWindows = 64;

/// Registers --batch-sweep and its flags (dpt::add_sweep_flags; the target
/// as --target-bits, held-out bits per character; no --sweep-plot: --plot
/// writes the sweep's chart); refuses (exit 2) the lesson's flags beside it,
/// an optimizer with no grid, and --ranks other than 1.
void add_lm_sweep_flags(CLI::App& app, const Ch14Flags& f, dpt::SweepFlags& sweep);

/// The rate grid the sweep tunes `optimizer` over (sgd | adamw), ascending.
std::vector<float> lm_learning_rate_grid(const std::string& optimizer);

/// The sweep's settings from its flags: the target on held-out bits per
/// character (lower is better), batches from kLmSweepMinBatch, the grid.
dpt::SweepSettings lm_sweep_settings(const dpt::SweepFlags& sweep, const std::string& optimizer);

/// One run of the GPT to `target` on one device: from `initial` weights
/// (flat, named_parameters() order), batches of `batch` windows from the
/// seeded window stream, rate lr_at(step), the held-out bits per character
/// of kLmSweepEvalWindows windows after each of the sweep's
/// evaluation steps; at most `max_steps` steps.
dpt::TargetRun train_gpt_to_target(const Corpus& text, const Ch14Flags& f, const std::vector<float>& initial,
                                   dpt::Device& device, int64_t batch, const std::function<float(int64_t)>& lr_at,
                                   int64_t max_steps, const dpt::SweepTarget& target);

/// The sweep as the lecture runs it (rank 0 of one): narrates the target and
/// the grid, sweeps from `model`'s weights, prints the tables, writes the
/// sweep's chart to --plot, adds the verdicts and summary rows to `run`. Throws
/// dpt::Error on more than one rank (mpirun -np N with N > 1).
void run_lm_sweep(dpt::ModelChapterRun& run, const Gpt& model, const Corpus& text, const Ch14Flags& f,
                  const dpt::SweepFlags& sweep);
