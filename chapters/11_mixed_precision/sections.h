/// @file sections.h
/// @brief The checks chapter 11's lecture runs besides training (provided):
/// the rounding against the formats' definitions, your master_step on one
/// weight and on an overflowed step, the scale sequence against the scaler's
/// laws, and recomputation's memory, time and gradients.
#pragma once

#include <string>

#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "mixed_training.h"

namespace dpt::ch11 {

/// Section 1: a few numbers in both formats, and a verdict on known patterns.
void show_formats(const Narrator& say, Verdicts& v);
/// Section 2: ten updates below half a bf16 step through your master_step.
void small_updates(const Narrator& say, Verdicts& v);
/// Section 3: an inf gradient through your master_step, every bit compared.
void overflowed_step(const Options& o, Device& device, const Narrator& say, Verdicts& v);
/// Section 3, the scaler alone: your update_loss_scale over a scripted run of
/// overflows and clean steps (and a growth that would not be finite), the
/// scales against ch11.h's laws, and 500 steps under a ceiling S*: the goal
/// law; needs no master_step.
void scaler_alone(const Options& o, Device& device, const Narrator& say, Verdicts& v);
/// "" when run.scales keep update_loss_scale's step-by-step laws (ch11.h) for s.scaler's
/// settings, given run.overflowed; else the first step where one breaks,
/// and which.
std::string scale_departure(const Setting& s, const MixedRun& run);
/// Section 6: one step of `model` (widths) in `p` with each --recompute
/// policy: peak activation bytes predicted and measured, time, and the
/// gradients against no recomputation, bit for bit.
void recompute_section(const Options& o, Device& device, Precision p, const std::string& model, const Narrator& say,
                       Verdicts& v);

}  // namespace dpt::ch11
