/// @file ch11.h
/// @brief Chapter 11's holes, each specified once: the dynamic loss scaler,
/// the step that turns a 16-bit gradient into an update of the fp32 master
/// weights, and backward through a forward that kept only checkpoints.
///
/// Fill them in `exercises/11_mixed_precision/`; tiered hints are in
/// \ref ch11_hints. `ctest --preset student -L ch11` checks them against
/// PyTorch's documented GradScaler rule, worked out step by step in the test,
/// and against an fp32 update written out in the test; `ch11_mixed_precision`
/// prints ✔/✘ verdicts for them. The 16-bit formats are precision.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/optim.h"
#include "dpt/tensor.h"
#include "precision.h"

namespace dpt::ch11 {

/// A loss scaler's settings and state: `--loss-scale dynamic` (PyTorch's
/// torch.amp.GradScaler defaults), `static:S` (dynamic = false, scale S) or
/// `none` (dynamic = false, scale 1).
struct LossScaler {
  float scale = 65536.0f;         ///< S: backward runs on S · loss (init_scale 2^16)
  float growth_factor = 2.0f;     ///< the scale's factor when it grows
  float backoff_factor = 0.5f;    ///< the scale's factor when it backs off
  int64_t growth_interval = 2000; ///< overflow-free steps in a row before it grows
  int64_t good_steps = 0;         ///< overflow-free steps in a row since the scale last changed or overflowed
  bool dynamic = true;            ///< false: the scale never changes
};

/// Updates `scaler` after a step whose gradients of S · loss overflowed
/// (some entry ±inf or NaN: `overflowed`) or did not, as PyTorch's
/// GradScaler.update() does. Why it exists: a step with an inf or NaN
/// gradient is never taken (master_step skips it), so S must be small
/// enough that skips stay rare, and large enough that small gradients
/// survive 16 bits.
///
/// What the scaler guarantees, for a dynamic scaler, after every call:
///  - it backs off at once: a step that overflowed leaves the scale
///    backoff_factor times what it was;
///  - it grows only on evidence: the scale grows (by growth_factor) after a
///    step exactly when that step completes growth_interval overflow-free
///    steps in a row, none of them already counted toward an earlier change
///    of the scale; after any other overflow-free step it is unchanged;
///  - good_steps means what its brief says, whatever happened before;
///  - the scale is finite and positive: a growth that would not be finite is
///    not made (the run of clean steps is used up all the same).
/// A static scaler (dynamic = false) never changes, scale nor count.
/// (Hole: exercises/11_mixed_precision/loss_scaler.cpp.)
void update_loss_scale(LossScaler& scaler, bool overflowed);

/// The optimizer step of a mixed-precision run: from the 16-bit gradients of
/// scale · loss to the fp32 master weights, and back to the 16-bit weights
/// forward reads. Returns true when it stepped, false when it skipped.
///
/// On entry: `params[i]` holds 16-bit weights (each element representable in
/// `precision`) and `params[i].grad()` the gradient of scale · loss as the
/// 16-bit run stored it; `masters[i]` is the fp32 master copy of params[i]
/// (same shape); `optimizer` was built on `masters` and keeps its state in
/// fp32. `scale` is finite and positive.
///
/// Postconditions:
///  - when every entry of every params[i].grad() is finite: the optimizer has
///    taken exactly one step, and masters[i] and its state hold what a
///    float32 run of that optimizer would hold after one step from the same
///    state with the gradient of the loss itself — not of scale · loss —
///    to 1 ulp of that gradient; params[i] hold the weights the next forward
///    reads: masters[i]'s values as `precision` represents them (round_to);
///    returns true;
///  - otherwise (an inf or NaN anywhere): params[i], masters[i] and the
///    optimizer's state hold the same bits as on entry and the optimizer has
///    not stepped; returns false.
/// params[i].grad() and masters[i].grad() may be changed either way.
/// (Hole: exercises/11_mixed_precision/master_step.cpp.)
bool master_step(std::vector<Tensor>& params, std::vector<Tensor>& masters, Optimizer& optimizer, float scale,
                 Precision precision);

/// Recomputes segment k's forward, graph on, from `input` (its checkpoint, or
/// a handle to it) and returns the segment's output.
using SegmentForward = std::function<Tensor(std::size_t k, const Tensor& input)>;
/// Turns the last segment's output into the scalar backward starts from.
using LossOf = std::function<Tensor(const Tensor& output)>;

/// Backward through a forward that kept only checkpoints (recompute.h).
///
/// On entry: checkpoints[k], k = 0 … K−1 (K ≥ 1), is the input of segment
/// k, computed with no graph (no tensor in it requires grad); segment k's
/// output is segment k+1's input; loss_of(forward(K−1, …)) is the scalar to
/// differentiate. The segments' parameters are leaves with no gradient yet.
///
/// Postconditions:
///  - every parameter the segments use holds in grad() the same bits that
///    backward(loss_of(segments 0 … K−1 run in a row with the graph on))
///    would leave there;
///  - at most one segment's graph is alive at any moment, and
///    checkpoints[k] is released (left undefined) no later than the end of
///    segment k's backward: the activations alive at once never exceed the
///    checkpoints still needed plus one segment's graph;
///  - forward is called once per segment.
/// (Hole: exercises/11_mixed_precision/recompute.cpp.)
void recompute_backward(std::vector<Tensor>& checkpoints, const SegmentForward& forward, const LossOf& loss_of);

}  // namespace dpt::ch11
