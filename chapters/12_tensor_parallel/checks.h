/// @file checks.h
/// @brief What chapter 12's lecture checks beside the lesson: the --tp/--dp
/// layout, each rank's slices against the flags' model entry by entry, and
/// which way a wrong gradient is off (too much combined, or too little), so
/// the step check's ✘ says which.
///
/// No oracle here calls a hole's code: the slice check indexes the full
/// weight itself, the column probe and the gradient probe compare with one
/// device's gradient computed on the host.
#pragma once

#include <string>

#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "groups.h"
#include "tp_model.h"

namespace dpt::ch12 {

/// The split model's loss against one device's, relative: the logits sum
/// ≤ 785 products in another order (the slices' partial sums added by the
/// all-reduce), ~1e-7 relative each; the loss (~2.3) moves by ~1e-6. A
/// logit off by ~0.1 moves the loss by 1e-3 or more (measured on planted
/// mistakes: 3.6e-3 on 2 ranks, 4e-3 on 4; the instructor key lists them).
constexpr double kForwardTolerance = 1e-5;

/// T and D on `world` ranks from --tp and --dp (0: not given; T = world when
/// neither is), or in `problem` the sentence why not (exit 2).
struct Layout {
  int tp = 0;           ///< T, the ranks a layer is split over
  int dp = 0;           ///< D, the copies of the split model
  std::string problem;  ///< "" when T x D fits the world, else why not
};
/// The layout of `world` ranks from --tp and --dp (0: not given).
Layout layout(int tp_flag, int dp_flag, int world);

/// The largest |x| over every rank of the world (each rank's own check,
/// judged once); a NaN on any rank gives +inf, which fails every bound.
double world_max(Context& ctx, double x);

/// Prints the last verdict now (✔, ✘ or —) as well as in the closing list:
/// a later hole may stop the lecture, and this verdict's holes have run.
void say_verdict_now(const Narrator& say, const Verdicts& v);

/// What slices_against_full measured, by split.
struct SliceGaps {
  double output = 0;  ///< Split::Output's slices
  double input = 0;   ///< Split::Input's slices
};
/// max |slice entry − full entry| over every entry of this rank's slices
/// (`model`, rank t of T) against `full` (host), by split: `output` over the
/// column-parallel weights and biases (Split::Output: rows t·h/T + i),
/// `input` over the row-parallel weights (Split::Input: columns t·h/T + j)
/// and their biases (whole). NaN in a split when one of its slices has the
/// wrong shape.
SliceGaps slices_against_full(const TensorParallelMLP& model, const MLP& full, int t, int T);

/// Collective over `group` (rank t of T): max |entry − full entry| of
/// gather_weight applied to slices of `full` that this chapter cuts itself
/// (not shard_weight's), so a wrong shard_weight is never blamed on
/// gather_weight. NaN when a gathered tensor has the wrong shape.
double gathered_against_full(Communicator& group, const MLP& full, Device& device);

/// The column probe's values are exact in float (see below): 1e-6 of the
/// largest entry allows any rounding a device adds; a wrong x gradient is off
/// by a share of it (measured 0.5 or more at T = 2 and 4).
constexpr double kColumnProbeTolerance = 1e-6;

/// What column_input_gradient found on this rank.
struct ColumnProbe {
  double gap = 0;    ///< max |dx − one device's| / max |one device's| (NaN: a wrong shape, or no gradient reached x)
  double ratio = 1;  ///< <dx, dx_one> / <dx_one, dx_one>: 1 right, 1/T an average or one rank's share
};

/// Collective over `group` (T ranks): column_parallel_linear on a stand-in
/// layer, x (3, 5) replicated and weight (4T, 5), rank t given rows [4t, 4t+4)
/// of it as this chapter indexes them (not through shard_weight), and the
/// loss Σ_t Σ y_t ∘ r_t for a fixed r (3, 4T), each rank backwarding its own
/// block's term. One device's x gradient is r · W; every value is a multiple
/// of 1/8 below 2, so every product and sum is exact in float and the right
/// answer matches it to the bit whatever the summation order.
ColumnProbe column_input_gradient(Communicator& group, Device& device);

/// Collective over the world: the verdict "column layer: x's gradient = one
/// device's d loss/dx on every rank" from column_input_gradient on each TP
/// group, the worst gap over the world; its ✘ gives rank 0's ratio to one
/// device's and asks which operator gives that gradient. With T = 1 it
/// cannot fail (`one_rank`).
void judge_column_input_gradient(Context& ctx, Groups& groups, Verdicts& v, const std::string& one_rank);

/// Collective over the world: one forward and backward of `model` on the
/// first --batch samples (the same on every rank), its gradients gathered
/// over each TP group, compared on world rank 0 with one device's gradient
/// of the flags' model on those samples. Returns (rank 0) the sentence the
/// step check blames: the parameter whose gradient is furthest from one
/// device's and its ratio to it — above 1 "too much", below 1 "too little" —
/// or, when the TP group is right at step 0, the data-parallel average.
/// Before the gradients, in order: slices that are not the flags' model
/// (`slices_ok` false: section 2's holes), then a forward whose loss is not
/// one device's (beyond kForwardTolerance). Leaves gradients on `model`'s
/// slices (training zeroes them).
std::string combining_cause(Context& ctx, Groups& groups, TensorParallelMLP& model, const Options& o,
                            const Dataset& data, bool slices_ok);

}  // namespace dpt::ch12
