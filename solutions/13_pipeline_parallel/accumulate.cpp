// solutions/13_pipeline_parallel/accumulate.cpp — the batch's mean loss is
// (1/B) Σ over samples = Σ_k (m_k / B) · (micro-batch k's mean loss), so each
// micro-batch's gradient enters with weight m_k / B (1/M only when all sizes
// are equal).
#include "ch13.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch13 {

void accumulate_micro_batch(std::vector<Tensor>& batch_grads, const std::vector<Tensor>& micro_grads,
                            int64_t micro_size, int64_t batch_size) {
  DPT_CHECK(batch_grads.size() == micro_grads.size(),
            "accumulate_micro_batch: " << batch_grads.size() << " batch gradients for " << micro_grads.size() << " parameters");
  DPT_CHECK(micro_size > 0 && micro_size <= batch_size,
            "accumulate_micro_batch: a micro-batch of " << micro_size << " in a batch of " << batch_size);
  const float weight = float(double(micro_size) / double(batch_size));
  for (std::size_t i = 0; i < micro_grads.size(); ++i) axpy_(batch_grads[i], weight, micro_grads[i]);
}

}  // namespace dpt::ch13
