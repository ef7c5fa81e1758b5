/// @file ch11.h
/// @brief Chapter 11's holes, each specified once: the dynamic loss scaler,
/// the step that turns a 16-bit gradient into an update of the fp32 master
/// weights, and backward through a forward that kept only checkpoints.
///
/// Fill them in `exercises/11_mixed_precision/`; tiered hints are in
/// \ref ch11_hints. `ctest --preset student -L ch11` checks the scaler's laws
/// on traces of events, the step against an fp32 update written out in the
/// test, and the recomputed gradients against one plain backward; `ch11_mixed_precision`
/// prints ✔/✘ verdicts for them. The 16-bit formats are precision.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/optim.h"
#include "dpt/tensor.h"
#include "precision.h"

namespace dpt::ch11 {

/// A loss scaler's settings and state: `--loss-scale dynamic` (the
/// settings of PyTorch's torch.amp.GradScaler), `static:S` (dynamic = false,
/// scale S) or `none` (dynamic = false, scale 1).
struct LossScaler {
  float scale = 65536.0f;         ///< S: backward runs on S · loss (init_scale 2^16)
  float growth_factor = 2.0f;     ///< GradScaler's factor when it grows (yours may grow by another)
  float backoff_factor = 0.5f;    ///< GradScaler's factor when it backs off (yours may shrink by another)
  int64_t growth_interval = 2000; ///< n: sets how patient the scaler may be (the laws below)
  int64_t memory = 0;             ///< yours: what update_loss_scale remembers between calls (0 at the start; nothing else reads it)
  bool dynamic = true;            ///< false: the scale never changes
};

/// Chooses the scale for the next step, given whether this step's gradients
/// of S · loss overflowed (some entry ±inf or NaN: `overflowed`). Why it
/// exists: a step with an inf or NaN gradient is never taken (master_step
/// skips it), so S must be small enough that skips stay rare, and as large
/// as that allows, so that small gradients survive 16 bits; the gradients'
/// size drifts as training goes on, so the scale must keep finding out
/// whether a larger S is safe. The policy — how far to shrink, when and how
/// far to try larger, what to remember in `memory` — is yours.
///
/// Call t = 1, 2, … is one step; S_t is the scale after it (S_0 the scale
/// the scaler started with); n is growth_interval. The laws a dynamic
/// scaler keeps, on every sequence of calls:
///  - S_t and 1/S_t are finite floats above 0 (what `static:S` asks of S);
///  - an overflow shrinks it: after an overflowed step, S_t < S_{t−1}
///    (unless 1 / (S_{t−1} / 2) is not a finite float);
///  - a clean step never shrinks it: after a clean step, S_t ≥ S_{t−1};
///  - it keeps probing upwards: among any 4n clean steps in a row, one
///    grows the scale (unless 2 · S is not a finite float);
///  - it settles near the largest safe scale: on a run of 100n steps
///    (n ≥ 5) in which a step overflows exactly when its scale is above
///    some S*, starting anywhere within a factor 2^10 of S*, through the
///    run's second half S_t stays within a factor 16 of S*, and at most 2
///    of every n of those steps are skipped (the page argues the bounds).
/// A static scaler (dynamic = false) never changes its scale.
/// (Hole: exercises/11_mixed_precision/loss_scaler.cpp.)
void update_loss_scale(LossScaler& scaler, bool overflowed);

/// The optimizer step of a mixed-precision run: one update of the fp32
/// master weights by the gradients a 16-bit backward left, with the 16-bit
/// weights forward reads kept consistent with the masters. Returns true
/// when it stepped, false when it skipped.
///
/// On entry: `params[i]` holds 16-bit weights (each element representable in
/// `precision`) and `params[i].grad()` what this step's 16-bit backward left
/// there, under loss scaling by `scale` (finite and positive; \ref
/// ch11_scaling); `masters[i]` is the fp32 master copy of params[i] (same
/// shape); `optimizer` was built on `masters` and keeps its state in fp32.
///
/// Postconditions:
///  - a step whose gradients hold an inf or NaN anywhere changes nothing:
///    params[i], masters[i] and the optimizer's state hold the same bits as
///    on entry, the optimizer has not counted a step, and it returns false;
///  - any other step returns true, and then:
///    - masters[i] and the optimizer's state hold what a float32 run of that
///      optimizer would hold after exactly one step from the same state,
///      driven by the gradient of the loss itself, as 16 bits gave it, to
///      1 ulp of that gradient — whatever `scale` was;
///    - every element of params[i] is the `precision` value nearest the
///      matching element of masters[i] (ties to even, precision.h's
///      rounding), so the next forward reads the masters in 16 bits.
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
///  - forward is called once per segment, and at most one segment's graph
///    is alive at any moment: the activations alive at once never exceed
///    the checkpoints still held plus one segment's graph;
///  - every checkpoints[k] is released (left undefined), each no later than
///    the end of segment k's backward.
/// (Hole: exercises/11_mixed_precision/recompute.cpp.)
void recompute_backward(std::vector<Tensor>& checkpoints, const SegmentForward& forward, const LossOf& loss_of);

}  // namespace dpt::ch11
