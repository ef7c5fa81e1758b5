/// @file model_pieces.h
/// @brief A model split over ranks, put back together on one rank: for the
/// step check (dpt/step_check.h) and for the model the harness scores.
///
/// A split model is described as pieces. A piece is a block of one of the
/// full MLP's parameters: which parameter (MLP::parameters() order: layer l's
/// weight is 2l, its bias 2l + 1), where the block starts (first row, first
/// column) and the rank's tensor holding it. Any split is a list of pieces:
///
///     by depth (ch13):        stage s: every parameter of its layers, whole
///     by tensor slices (ch12): rank t of T: rows [t·h/T, (t+1)·h/T) of a
///                             column-parallel weight, columns of a row-parallel one
///     both (ch15):            stage s's layers, each as rank t's slice
///
/// Over the ranks of `comm` the pieces must cover every entry of the full
/// model exactly once (a tensor held whole by several ranks, a replicated
/// bias, is listed by one of them); rank 0 checks that and says which
/// parameter is short or doubled.
///
///     std::vector<ModelPiece> mine = {{2 * first_layer, 0, 0, weight}, …};
///     std::vector<float> w = gather_model_flat(pipe, widths, mine);                // rank 0: Ψ floats
///     std::vector<float> g = gather_model_flat(pipe, widths, gradients_of(mine));
///
/// Left out: gathering to another rank than 0, pieces that are not
/// rectangular blocks (a strided split).
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm/communicator.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt {

/// A rectangular block of one parameter of the full model, held by one rank.
struct ModelPiece {
  int64_t parameter = 0;  ///< index in MLP::parameters(): layer l's weight 2l, its bias 2l + 1
  int64_t row = 0;        ///< the block's first row (a weight's output feature, a bias's entry)
  int64_t column = 0;     ///< the block's first column (a weight's input feature); 0 for a bias
  Tensor value;           ///< the block: (rows, columns) of a weight, (rows,) of a bias; any device
};

/// The same pieces with each value replaced by its gradient (value.grad());
/// a dpt::Error naming the parameter when one has none.
std::vector<ModelPiece> gradients_of(const std::vector<ModelPiece>& pieces);

/// Pieces for layers [first_layer, first_layer + params.size() / 2) held
/// whole: `params` is (weight, bias) per layer, first to last — a split by depth.
std::vector<ModelPiece> whole_layers(int64_t first_layer, const std::vector<Tensor>& params);

/// Collective over `comm`: every rank passes its pieces; rank 0 gets the full
/// model of `widths` ({in, hidden…, out}) flattened in MLP::parameters()
/// order on the host (Ψ floats), the other ranks an empty vector (they do not
/// read `widths`). On rank 0, a piece outside its parameter, an entry covered
/// twice or not at all is a dpt::Error naming the parameter (and the ranks,
/// for a doubled entry).
std::vector<float> gather_model_flat(Communicator& comm, const std::vector<int64_t>& widths,
                                     const std::vector<ModelPiece>& pieces);

/// gather_model_flat into a model: on rank 0 `full` (not null there; any
/// device) gets the gathered parameters, its widths the full model's; other
/// ranks pass null or anything, which is left alone. Collective over `comm`.
void gather_model(Communicator& comm, const std::vector<ModelPiece>& pieces, MLP* full);

}  // namespace dpt
