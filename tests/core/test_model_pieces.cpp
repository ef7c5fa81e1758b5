// test_model_pieces.cpp — gather_model_flat / gather_model (dpt/model_pieces.h):
// a model split by depth and by tensor slices at once (chapter 15's case: a
// 2 × 2 grid of rank threads) comes back on rank 0 equal, bit for bit, to the
// full model's weights saved before the split; a split that holds an entry
// twice, or not at all, is an error naming the parameter, as is a piece with
// no gradient to gather.
#include "support/catch.h"

#include <vector>

#include "dpt/check.h"
#include "dpt/flatten.h"
#include "dpt/grid.h"
#include "dpt/model_pieces.h"
#include "support/ranks.h"

using namespace dpt;

namespace {

const std::vector<int64_t> kWidths = {6, 8, 4, 8, 3};  // 4 layers: two (column, row) pairs

// Rows [r0, r0 + rows) × columns [c0, c0 + columns) of `full` (host, 1-D as
// one column), copied to a new tensor on `device`, indexed here.
Tensor block_of(const Tensor& full, int64_t r0, int64_t rows, int64_t c0, int64_t columns, Device& device) {
  const int64_t width = full.dim() == 2 ? full.shape()[1] : 1;
  std::vector<float> values;
  for (int64_t i = r0; i < r0 + rows; ++i)
    for (int64_t j = c0; j < c0 + columns; ++j) values.push_back(full.data()[i * width + j]);
  return Tensor::from_vector(full.dim() == 2 ? Shape{rows, columns} : Shape{rows}, values, device);
}

// Rank (t, s) of a tp 2 × pp 2 grid: stage s holds pair s (layers 2s, 2s+1);
// within it, the first layer's rows and bias split by t, the second's columns
// split by t, its bias whole on t = 0 only.
std::vector<ModelPiece> grid_pieces(const MLP& full, int t, int s, Device& device) {
  const int T = 2;
  std::vector<ModelPiece> pieces;
  const std::vector<Linear>& layers = full.layers();
  const Linear& column = layers[std::size_t(2 * s)];
  const Linear& row = layers[std::size_t(2 * s + 1)];
  const int64_t h = column.weight.shape()[0] / T, in = column.weight.shape()[1], out = row.weight.shape()[0];
  pieces.push_back({4 * s, t * h, 0, block_of(column.weight, t * h, h, 0, in, device)});
  pieces.push_back({4 * s + 1, t * h, 0, block_of(column.bias, t * h, h, 0, 1, device)});
  pieces.push_back({4 * s + 2, 0, t * h, block_of(row.weight, 0, out, t * h, h, device)});
  if (t == 0) pieces.push_back({4 * s + 3, 0, 0, block_of(row.bias, 0, out, 0, 1, device)});
  return pieces;
}

}  // namespace

TEST_CASE("gather_model: a model split by depth and by tensor slices comes back whole on rank 0, bit for bit",
          "[model_pieces]") {
  Rng rng(7);
  const MLP full(kWidths, Device::host(), rng);
  const std::vector<float> saved = flatten(full.parameters());  // the oracle, before any split
  std::vector<float> gathered;
  std::vector<float> into_model;
  std::vector<std::size_t> others(4, 1);
  dpt_test::run_ranks(4, [&](Context& ctx) {
    Grid grid(ctx.comm, {{"tp", 2, "--tp"}, {"pp", 2, "--pp"}});
    const std::vector<ModelPiece> mine = grid_pieces(full, grid.coord("tp"), grid.coord("pp"), ctx.device);
    std::vector<float> flat = gather_model_flat(ctx.comm, kWidths, mine);
    Rng other(99);  // a model of the same shape, other weights: gather_model must overwrite all of them
    MLP target(kWidths, ctx.device, other);
    gather_model(ctx.comm, mine, ctx.rank == 0 ? &target : nullptr);
    others[std::size_t(ctx.rank)] = flat.size();
    if (ctx.rank == 0) gathered = flat, into_model = flatten(target.parameters());
  });
  CHECK(gathered == saved);
  CHECK(into_model == saved);
  CHECK(others == std::vector<std::size_t>{saved.size(), 0, 0, 0});  // rank 0 alone gets the model
}

TEST_CASE("gather_model: a model split by depth only (stages of whole layers) comes back whole", "[model_pieces]") {
  Rng rng(3);
  const MLP full(kWidths, Device::host(), rng);
  const std::vector<float> saved = flatten(full.parameters());
  std::vector<float> gathered;
  dpt_test::run_ranks(3, [&](Context& ctx) {  // stages of 2, 1 and 1 layers
    const int first[] = {0, 2, 3, 4};
    std::vector<Tensor> params;
    for (int l = first[ctx.rank]; l < first[ctx.rank + 1]; ++l) {
      const Linear& layer = full.layers()[std::size_t(l)];
      params.push_back(layer.weight.to(ctx.device)), params.push_back(layer.bias.to(ctx.device));
    }
    std::vector<float> flat = gather_model_flat(ctx.comm, kWidths, whole_layers(first[ctx.rank], params));
    if (ctx.rank == 0) gathered = flat;
  });
  CHECK(gathered == saved);
}

TEST_CASE("gather_model: an entry held twice, or by no rank, is an error naming the parameter", "[model_pieces]") {
  Rng rng(5);
  const MLP full({4, 2}, Device::host(), rng);  // one layer: fc0.weight (2, 4), fc0.bias (2,)
  auto gather_with = [&](bool bias_on_both, bool bias_anywhere) {
    dpt_test::run_ranks(2, [&](Context& ctx) {
      const Linear& layer = full.layers()[0];
      std::vector<ModelPiece> mine = {{0, ctx.rank, 0, block_of(layer.weight, ctx.rank, 1, 0, 4, ctx.device)}};
      if (bias_anywhere && (bias_on_both || ctx.rank == 1)) mine.push_back({1, 0, 0, layer.bias.to(ctx.device)});
      gather_model_flat(ctx.comm, full.widths(), mine);
    });
  };
  CHECK_NOTHROW(gather_with(false, true));
  CHECK_THROWS_WITH(gather_with(true, true), contains_text("fc0.bias (2,) is held by rank 0 and by rank 1"));
  CHECK_THROWS_WITH(gather_with(false, false), contains_text("no rank holds entry 0 (row-major) of fc0.bias (2,)"));
  const std::vector<ModelPiece> no_backward = {{3, 0, 0, Tensor::zeros({2}, Device::host())}};
  CHECK_THROWS_WITH(gradients_of(no_backward), contains_text("fc1.bias's piece has no gradient after backward"));
}
