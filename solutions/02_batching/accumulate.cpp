// solutions/02_batching/accumulate.cpp — the batch gradient from K micro-batches.
//
// The batch's mean loss is Σ_k (n_k / B) · L_k, L_k the mean loss of piece k
// of n_k samples: each piece's loss is scaled by n_k / B (1/K only when
// every n_k is B/K), and backward() adds every piece's gradient into the
// same p.grad(), cleared once before the first.
#include "ch02.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

Gradients accumulated_gradient(const MLP& model, const Batch& batch, int micro_batches) {
  const int64_t total = batch.x.size(0);
  DPT_CHECK(micro_batches >= 1 && micro_batches <= total,
            "accumulated_gradient: " << micro_batches << " micro-batches of a batch of " << total
                                     << " samples; needs 1 <= micro_batches <= the batch size");
  std::vector<Tensor> params = model.parameters();
  for (auto& p : params) p.zero_grad();
  const int64_t base = total / micro_batches, extra = total % micro_batches;  // pieces of base+1, then base
  int64_t begin = 0;
  for (int k = 0; k < micro_batches; ++k) {
    const int64_t end = begin + base + (k < extra ? 1 : 0);
    std::vector<int64_t> labels(batch.y.begin() + begin, batch.y.begin() + end);
    Tensor loss = softmax_cross_entropy(model.forward(batch.x.rows(begin, end)), labels);
    scale(loss, float(end - begin) / float(total)).backward();  // adds into every p.grad()
    begin = end;
  }
  Gradients result;
  for (auto& p : params) result.push_back(p.grad().clone());
  return result;
}

}  // namespace dpt::ch02
