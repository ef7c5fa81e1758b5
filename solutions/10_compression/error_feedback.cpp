// solutions/10_compression/error_feedback.cpp — error feedback around any
// compressor (spec in ch10.h): compress what this step owes, g + e, and keep
// the part of it that was not delivered for the next step.
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void error_feedback_step(Communicator& comm, Compressor& compressor, std::vector<float>& grad,
                         std::vector<float>& residual) {
  DPT_CHECK(grad.size() == residual.size(), "error_feedback_step: grad has " << grad.size() << " entries, residual "
                                                                             << residual.size());
  for (std::size_t i = 0; i < grad.size(); ++i) grad[i] += residual[i];  // p = g + e: what this rank owes
  const std::vector<float> owed = grad;
  std::vector<float> delivered;
  compressor.reduce(comm, grad, delivered);  // grad: the mean of what was delivered, the same everywhere
  for (std::size_t i = 0; i < grad.size(); ++i) residual[i] = owed[i] - delivered[i];  // e' = p − delivered
}

}  // namespace dpt::ch10
