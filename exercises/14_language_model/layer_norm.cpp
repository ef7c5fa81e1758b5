// exercises/14_language_model/layer_norm.cpp — hole: LayerNorm's backward.
// The contract is dpt::ch14::layer_norm_backward in
// chapters/14_language_model/ch14.h; the forward it differentiates is
// chapters/14_language_model/layer_norm_op.cpp; hints in tiers are in
// docs/ch14_language_model.md (§ Hints).
//
// Pointers:
//   - Everything arrives on the host: t.data() is a row-major float*, entry
//     (r, j) of a (rows, C) tensor at [r * C + j]; saved.mean.data()[r] and
//     saved.rstd.data()[r] are row r's.
//   - Tensor::from_vector(shape, values, Device::host()) builds a result.
//   - Derive on paper first, for one row: y_j = x̂_j · w_j + b_j. Which
//     quantities of the row does every x_j reach the loss through?
#include "ch14.h"

#include "dpt/check.h"

namespace dpt::ch14 {

LayerNormGradients layer_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                       const LayerNormSaved& saved) {
  (void)dout, (void)x, (void)weight, (void)saved;
  throw NotImplemented("ch14: layer_norm_backward — see exercises/14_language_model/layer_norm.cpp");
}

}  // namespace dpt::ch14
