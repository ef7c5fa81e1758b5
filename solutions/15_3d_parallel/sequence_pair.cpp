// solutions/15_3d_parallel/sequence_pair.cpp — sequence parallelism's
// conjugate pair. gather: every rank's positions to every rank (all-gather);
// each rank's split layer then adds its share to every position's gradient,
// so backward sums them and hands each rank its own positions'
// (reduce-scatter). scatter: the ranks' partial sums summed, each rank keeping
// its positions (reduce-scatter); every rank's partial fed every position, so
// backward hands every rank every position's gradient (all-gather).
#include "ch15.h"
#include "dpt/autograd.h"
#include "sequence_parallel.h"

namespace dpt::ch15 {

namespace {
Tensor all_gather_positions(Communicator& group, const Tensor& mine, int64_t batch) {
  const std::vector<float> local = mine.to_vector();
  std::vector<float> all(local.size() * std::size_t(group.size()));
  group.all_gather(local.data(), all.data(), int64_t(local.size()));  // rank-major blocks
  return sequence_major(all, batch, mine.size(1), group.size(), mine.device());
}

Tensor reduce_scatter_positions(Communicator& group, const Tensor& whole, int64_t batch) {
  const std::vector<float> blocks = rank_major(whole, batch, group.size());
  std::vector<float> mine(blocks.size() / std::size_t(group.size()));
  group.reduce_scatter(blocks.data(), mine.data(), int64_t(mine.size()), ReduceOp::Sum);
  return Tensor::from_vector({whole.size(0) / group.size(), whole.size(1)}, mine, whole.device());
}
}  // namespace

Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch) {
  Communicator* comm = &group;  // the graph outlives this call
  return record(all_gather_positions(group, mine, batch), "gather_sequence", {mine},
                [comm, batch](const Tensor& dout) -> std::vector<Tensor> {
                  return {reduce_scatter_positions(*comm, dout, batch)};
                });
}

Tensor scatter_sequence(Communicator& group, const Tensor& partial, int64_t batch) {
  Communicator* comm = &group;
  return record(reduce_scatter_positions(group, partial, batch), "scatter_sequence", {partial},
                [comm, batch](const Tensor& dout) -> std::vector<Tensor> {
                  return {all_gather_positions(*comm, dout, batch)};
                });
}

}  // namespace dpt::ch15
