// sequence_parallel.cpp — the conjugate pair along the sequence
// (sequence_parallel.h). The collectives move rank-major blocks ([rank][B][T/tp][C]);
// the model keeps sequence-major rows ([B][T][C]), so each side permutes.
#include "sequence_parallel.h"

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch15 {

namespace {
// [rank][b][τ][c] (rank-major blocks of T/tp positions) → [b][rank·T/tp + τ][c] (rows), or back.
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

Tensor gather_rows(Communicator& group, const Tensor& mine, int64_t batch, Device& device) {
  const int tp = group.size();
  const int64_t width = mine.size(1), time = mine.size(0) / batch * tp;
  const std::vector<float> local = mine.to_vector();
  std::vector<float> all(local.size() * std::size_t(tp));
  group.all_gather(local.data(), all.data(), int64_t(local.size()));
  return Tensor::from_vector({batch * time, width}, permute_blocks(all, batch, time, width, tp, true), device);
}

Tensor reduce_scatter_rows(Communicator& group, const Tensor& whole, int64_t batch, Device& device) {
  const int tp = group.size();
  const int64_t width = whole.size(1), time = whole.size(0) / batch;
  const std::vector<float> blocks = permute_blocks(whole.to_vector(), batch, time, width, tp, false);
  std::vector<float> mine(blocks.size() / std::size_t(tp));
  group.reduce_scatter(blocks.data(), mine.data(), int64_t(mine.size()), ReduceOp::Sum);
  return Tensor::from_vector({batch * time / tp, width}, mine, device);
}

void check_rows(const Tensor& x, int64_t batch, int64_t per_rank_divisor, const char* what) {
  DPT_CHECK(x.dim() == 2 && batch > 0 && x.size(0) % (batch * per_rank_divisor) == 0,
            what << ": " << x.size(0) << " rows do not make " << batch << " sequences split over " << per_rank_divisor
                 << " ranks");
}
}  // namespace

Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch) {
  check_rows(mine, batch, 1, "gather_sequence");
  Communicator* comm = &group;  // the graph outlives this call
  Device* device = &mine.device();
  return record(gather_rows(group, mine, batch, mine.device()), "gather_sequence", {mine},
                [comm, batch, device](const Tensor& dout) -> std::vector<Tensor> {
                  return {reduce_scatter_rows(*comm, dout, batch, *device)};
                });
}

Tensor scatter_sequence(Communicator& group, const Tensor& partial, int64_t batch) {
  check_rows(partial, batch, group.size(), "scatter_sequence");
  Communicator* comm = &group;
  Device* device = &partial.device();
  return record(reduce_scatter_rows(group, partial, batch, partial.device()), "scatter_sequence", {partial},
                [comm, batch, device](const Tensor& dout) -> std::vector<Tensor> {
                  return {gather_rows(*comm, dout, batch, *device)};
                });
}

std::vector<int64_t> sequence_rows(int64_t batch, int64_t time, int t, int tp) {
  const int64_t local = time / tp;
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t tau = 0; tau < local; ++tau) rows.push_back(b * time + t * local + tau);
  return rows;
}

}  // namespace dpt::ch15
