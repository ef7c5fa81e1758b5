/// @file recompute.h
/// @brief Activation recomputation: forward keeps only the inputs of a few
/// segments of layers (checkpoints) and drops the rest; backward recomputes
/// what it needs from them, with one segment's activations alive at a time
/// — compute traded for memory. The segments and the forward are here; the
/// backward is your hole, ch11::recompute_backward (ch11.h).
///
///     none         every activation kept (plain autograd)          peak ∝ L layers
///     every-layer  a checkpoint before every layer                 peak ∝ L inputs + 1 layer
///     sqrt         a checkpoint every ⌈√L⌉ layers                  peak ∝ √L inputs + √L layers
///
/// Recomputed, each segment runs the very ops it ran the first time, so the
/// gradients can be the same bits as without recomputation. Extra cost: one
/// more forward of every segment (about a third more compute).
///
/// Left out: recomputing inside a layer, offloading checkpoints to the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "precision.h"

namespace dpt::ch11 {

/// --recompute none | every-layer | sqrt.
enum class Recompute { None, EveryLayer, Sqrt };
/// "none", "every-layer", "sqrt".
const char* recompute_name(Recompute r);
/// Parses --recompute; throws dpt::Error naming the choices otherwise.
Recompute parse_recompute(const std::string& text);

/// The first layer of every segment, then L: {0, …, L}. none: {0, L};
/// every-layer: {0, 1, …, L}; sqrt: every ⌈√L⌉ layers.
std::vector<int64_t> segment_bounds(int64_t layers, Recompute r);

/// Layers [begin, end) of `model` on `h` (already stored in `p`): each
/// Linear's output stored in `p`, ReLU after every layer but the model's
/// last. Gradients' flushes counted in `*flushes` when given.
Tensor forward_layers(const MLP& model, Tensor h, int64_t begin, int64_t end, Precision p, Flushes* flushes);

/// One forward and backward of scale · loss on `batch`, recomputing by `r`
/// (every-layer and sqrt call your recompute_backward):
/// leaves d(scale · loss)/dw in every parameter's grad() (as they were: the
/// caller rounds them) and returns the loss. Forward's allocations are
/// charged to Activations, backward's gradients to Grads (memory_ledger.h).
/// A dpt::Error out of recompute_backward comes out naming it and what it
/// owes each segment but the last.
double forward_backward(const MLP& model, const Batch& batch, Precision p, float scale, Recompute r,
                        Flushes* flushes);

/// Activation bytes held at the peak of forward_backward, by counting what
/// each op keeps for backward (float32 storage, B samples): per hidden layer
/// its Linear output, the stored copy and the ReLU output (one fewer in
/// fp32, where storing is the identity), for the last layer the output and
/// its stored copy plus softmax's probabilities, and the stored input x
/// (16-bit runs). With recomputation: the checkpoints still alive plus the
/// segment being recomputed, at the worst segment.
double predicted_activation_bytes(const MLP& model, int64_t batch, Precision p, Recompute r);

}  // namespace dpt::ch11
