/// @file layout_run.h
/// @brief One layout run end to end, for a caller that compares layouts
/// (the planner's --run-top): the grid, each rank's share of the model, the
/// training, what it measured. The lecture (main.cpp) does the same steps
/// with narration and verdicts between them.
#pragma once

#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "tp_training.h"

namespace dpt::ch15 {

/// Collective over the world: the layout of `f` on ctx.world ranks
/// (ch15_layout: a layout that does not fit is a dpt::Error with its
/// sentence), the model from f.lm.seed (or f.lm.load_weights) split over it,
/// f.lm.steps steps trained silently, no step check. `text` as the lecture
/// loads it (f.lm.shape.vocab = text.vocab()). The run's wall time is
/// TpRun::seconds (seconds per step: ÷ f.lm.steps); its traffic as the
/// lecture's tables. A hole not written throws NotImplemented.
TpRun run_layout(Context& ctx, const Ch15Flags& f, const Corpus& text);

}  // namespace dpt::ch15
