// solutions/01_sgd/loss_backward.cpp — backward of the mean softmax
// cross-entropy: dlogits[b][c] = (softmax(logits_b)[c] − [c = label_b]) / B.
//
// softmax is unchanged by subtracting a constant from a row, so each row is
// shifted by its largest logit first: every exp() is then at most 1 and the
// sum at least 1, for logits of any size.
#include "ch01.h"

#include <algorithm>
#include <cmath>

#include "dpt/check.h"

namespace dpt::ch01 {

Tensor softmax_cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& labels) {
  DPT_CHECK(logits.dim() == 2 && logits.size(0) >= 1 && logits.size(1) >= 1,
            "softmax_cross_entropy_backward: logits must be (B, C) with B, C >= 1, not "
                << shape_str(logits.shape()));
  const int64_t batch = logits.size(0), classes = logits.size(1);
  DPT_CHECK(int64_t(labels.size()) == batch,
            "softmax_cross_entropy_backward: " << batch << " rows of logits but " << labels.size() << " labels");
  Tensor dlogits = Tensor::zeros({batch, classes}, logits.device());
  for (int64_t b = 0; b < batch; ++b) {
    DPT_CHECK(labels[b] >= 0 && labels[b] < classes,
              "softmax_cross_entropy_backward: label " << labels[b] << " of row " << b << " is not a class in [0, "
                                                       << classes << ")");
    const float* z = logits.data() + b * classes;
    float* d = dlogits.data() + b * classes;
    const float largest = *std::max_element(z, z + classes);
    float total = 0;
    for (int64_t c = 0; c < classes; ++c) total += d[c] = std::exp(z[c] - largest);
    for (int64_t c = 0; c < classes; ++c) d[c] = (d[c] / total - (c == labels[b] ? 1.0f : 0.0f)) / float(batch);
  }
  return dlogits;
}

}  // namespace dpt::ch01
