// exercises/10_compression/error_feedback.cpp — hole: error feedback around a
// compressor. The contract is dpt::ch10::error_feedback_step in
// chapters/10_compression/ch10.h; hints in tiers are in
// docs/ch10_compression.md (§ Hints).
//
// Pointers:
//   - compressor.reduce(comm, x, delivered) (compressor.h) replaces x by the
//     mean over ranks of what was delivered and tells you, in `delivered`,
//     which part of this rank's x that was. Call it once.
//   - `residual` is yours to keep between steps: the training loop hands the
//     same vector back at the next step.
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void error_feedback_step(Communicator& comm, Compressor& compressor, std::vector<float>& grad,
                         std::vector<float>& residual) {
  (void)comm, (void)compressor, (void)grad, (void)residual;
  throw NotImplemented("ch10: error_feedback_step — see exercises/10_compression/error_feedback.cpp");
}

}  // namespace dpt::ch10
