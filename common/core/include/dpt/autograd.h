/// @file autograd.h
/// @brief Reverse-mode automatic differentiation: the graph, `backward()`, and
/// the grad-ready hooks that data-parallel training hangs its communication on.
///
/// Every differentiable op in ops.h that sees an input with `requires_grad`
/// records a `Node`: the inputs it needs gradients for and a closure that,
/// given the gradient of the op's output, returns the gradients of those
/// inputs. `backward(loss)` sorts the graph topologically and runs the closures
/// from the loss back to the leaves (the parameters), accumulating into each
/// leaf's `grad()`.
///
/// The one thing beyond micrograd: a leaf's gradient is *final* once every node
/// that consumes it has run. At that moment backward() fires the leaf's
/// grad-ready hooks. Chapter 05 starts an all-reduce from such a hook while
/// backward is still working on earlier layers — communication overlapped with
/// computation, exactly as PyTorch DDP does.
///
/// Left out: higher-order gradients, in-place ops on graph tensors, retain_graph.
#pragma once

#include <functional>
#include <vector>

#include "dpt/tensor.h"

namespace dpt {

/// One recorded op: which inputs need gradients, and how to compute them.
struct Node {
  /// Name of the op ("matmul", "relu", …) for error messages and debugging.
  const char* op = "";
  /// Inputs in the order `backward` returns their gradients.
  std::vector<Tensor> inputs;
  /// Given d(loss)/d(output), returns d(loss)/d(input_i) for every input
  /// (an undefined tensor for an input that does not require grad).
  std::function<std::vector<Tensor>(const Tensor& dout)> backward;
};

/// Runs reverse-mode autograd from `loss` (a one-element tensor, seeded with
/// d loss / d loss = 1). Accumulates into every reachable leaf's grad() and
/// fires each leaf's grad-ready hooks the moment its gradient is final. The
/// graph is freed as it goes: call backward() once per forward pass.
void backward(const Tensor& loss);

/// Runs reverse-mode autograd from a non-scalar `output`, whose gradient
/// d loss / d output is given: `output_gradient` (output's shape, on output's
/// device; it is only read). Every reachable leaf's grad() accumulates
/// d loss / d leaf = Σ_i output_gradient[i] · d output[i] / d leaf — what
/// backward(sum(output ⊙ output_gradient)) would give, without building that
/// loss (chapter 13's pipeline stages use it). Throws (dpt::Error) when either
/// is undefined, on a shape or device mismatch, or when nothing `output`
/// depends on requires grad. Hooks and freeing as backward(loss).
void backward(const Tensor& output, const Tensor& output_gradient);

/// Which of `leaves` backward(loss) would deliver a gradient to: entry i is
/// true when leaves[i] is in the graph recorded from the leaves to `loss`.
/// Walks the graph and computes nothing; call it before backward() (which
/// frees the graph). What DDP's find_unused_parameters asks after forward.
std::vector<bool> reaches(const Tensor& loss, const std::vector<Tensor>& leaves);

/// True when ops should record the graph on this thread (the default).
bool grad_enabled();

/// Turns graph recording off on this thread for its lifetime (optimizer
/// steps, evaluation, finite differences).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Makes a new differentiable op: attaches a node to `output` when grad mode is
/// on and any of `inputs` requires grad; returns `output` either way. `output`
/// is computed by the caller with plain (unrecorded) arithmetic: a copy,
/// kernels, a communicator call — record wires it into the graph.
/// `backward` gets d loss / d output (output's shape) and returns one gradient
/// per input, in `inputs` order, each of that input's shape, or an undefined
/// Tensor() for an input that needs none. It runs with recording off.
///
///     Tensor twice(const Tensor& x) {                       // y = 2x, dx = 2 dy
///       Tensor y = x.clone();
///       scale_(y, 2.0f);                                    // plain arithmetic (ops.h)
///       return record(y, "twice", {x}, [](const Tensor& dy) {
///         Tensor dx = dy.clone();
///         scale_(dx, 2.0f);
///         return std::vector<Tensor>{dx};
///       });
///     }
///
/// Every op in ops.h is written this way; so are the chapters' own ops.
Tensor record(Tensor output, const char* op, std::vector<Tensor> inputs,
              std::function<std::vector<Tensor>(const Tensor& dout)> backward);

}  // namespace dpt
