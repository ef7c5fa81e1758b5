// op_checks.h — the shape and device checks every op file shares (ops.cpp,
// transformer_ops.cpp), each failing with one sentence naming the op; and
// K(t), the loops for a tensor's memory. Private to the core.
#pragma once

#include "dpt/check.h"
#include "dpt/kernels.h"
#include "dpt/tensor.h"

namespace dpt {

/// The loops for t's memory.
inline Kernels& K(const Tensor& t) { return kernels_for(t.device()); }

/// Fails unless a and b have the same shape.
inline void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  DPT_CHECK(a.shape() == b.shape(),
            op << ": shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()) << " differ");
}
/// Fails unless a and b live on the same device.
inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  DPT_CHECK(&a.device() == &b.device(),
            op << ": inputs on " << a.device().name() << " and " << b.device().name()
               << "; copy one with .to(device) first");
}
/// Fails unless t is 2-D; `what` names it ("weight").
inline void check_2d(const char* op, const char* what, const Tensor& t) {
  DPT_CHECK(t.dim() == 2, op << ": " << what << " must be 2-D, got " << shape_str(t.shape()));
}

}  // namespace dpt
