// sequence_parallel.cpp — the row orders sequence parallelism moves between
// (sequence_parallel.h): the model keeps sequence-major rows ([B][T][C]),
// the collectives rank-major blocks ([rank][B][T/tp][C]).
#include "sequence_parallel.h"

#include "dpt/check.h"

namespace dpt::ch15 {

namespace {
// [rank][b][τ][c] ↔ [b][rank·T/tp + τ][c].
std::vector<float> permute_blocks(const std::vector<float>& in, int64_t batch, int64_t time, int64_t width, int tp,
                                  bool to_rows) {
  const int64_t local = time / tp;
  std::vector<float> out(in.size());
  for (int r = 0; r < tp; ++r)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t tau = 0; tau < local; ++tau) {
        const int64_t block = ((r * batch + b) * local + tau) * width, row = (b * time + r * local + tau) * width;
        for (int64_t c = 0; c < width; ++c)
          to_rows ? out[std::size_t(row + c)] = in[std::size_t(block + c)]
                  : out[std::size_t(block + c)] = in[std::size_t(row + c)];
      }
  return out;
}
}  // namespace

std::vector<float> rank_major(const Tensor& whole, int64_t batch, int tp) {
  DPT_CHECK(whole.dim() == 2 && batch > 0 && tp > 0 && whole.size(0) % (batch * tp) == 0,
            "rank_major: " << shape_str(whole.shape()) << " is not B = " << batch << " sequences of a length " << tp
                           << " ranks divide");
  return permute_blocks(whole.to_vector(), batch, whole.size(0) / batch, whole.size(1), tp, false);
}

Tensor sequence_major(const std::vector<float>& blocks, int64_t batch, int64_t width, int tp, Device& device) {
  const int64_t rows = int64_t(blocks.size()) / std::max<int64_t>(1, width);
  DPT_CHECK(batch > 0 && tp > 0 && width > 0 && rows * width == int64_t(blocks.size()) && rows % (batch * tp) == 0,
            "sequence_major: " << blocks.size() << " floats are not B = " << batch << " sequences of width " << width
                               << " split over " << tp << " ranks");
  return Tensor::from_vector({rows, width}, permute_blocks(blocks, batch, rows / batch, width, tp, true), device);
}

std::vector<int64_t> sequence_rows(int64_t batch, int64_t time, int t, int tp) {
  const int64_t local = time / tp;
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t tau = 0; tau < local; ++tau) rows.push_back(b * time + t * local + tau);
  return rows;
}

}  // namespace dpt::ch15
