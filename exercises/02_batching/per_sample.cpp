// exercises/02_batching/per_sample.cpp — hole: one gradient per sample.
// The spec is dpt::ch02::per_sample_gradients in chapters/02_batching/ch02.h.
//
// Hints, for each sample i of the batch:
//   1. take its row as a batch of one:  batch.x.rows(i, i + 1)  → (1, D)
//      and its label:                   {batch.y[i]}
//   2. clear the model's gradients (p.zero_grad() for p in model.parameters())
//   3. loss = softmax_cross_entropy(model.forward(x_i), {y_i}); loss.backward()
//   4. keep a *copy* of every parameter's gradient: p.grad().clone()
//      (the next backward would otherwise overwrite what you kept)
// Clear the gradients once more at the end.
#include "ch02.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

std::vector<Gradients> per_sample_gradients(const MLP& model, const Batch& batch) {
  (void)model, (void)batch;
  throw NotImplemented("ch02: per_sample_gradients — see exercises/02_batching/per_sample.cpp");
}

}  // namespace dpt::ch02
