// exercises/14_language_model/sample.cpp — hole: generation, what makes
// the trained model write. The contract is dpt::ch14::generate in
// chapters/14_language_model/ch14.h; hints in tiers are in
// docs/ch14_language_model.md (§ Hints).
//
// Pointers:
//   - model(tokens) returns logits (n, V); t.rows(a, b) is a view of rows
//     [a, b), t.to_vector() its floats on the host.
//   - rng.uniform() is uniform in [0, 1); use only `rng` for randomness, so a
//     seed gives the same text every run.
//   - NoGradGuard (dpt/autograd.h) stops the forward recording a graph
//     nobody will differentiate.
#include "ch14.h"

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch14 {

std::vector<int64_t> generate(const NextTokenScores& model, int64_t context, const std::vector<int64_t>& prompt,
                              int64_t count, float temperature, Rng& rng) {
  (void)model, (void)context, (void)prompt, (void)count, (void)temperature, (void)rng;
  throw NotImplemented("ch14: generate — see exercises/14_language_model/sample.cpp");
}

}  // namespace dpt::ch14
