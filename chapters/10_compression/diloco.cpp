// diloco.cpp — DiLoCo's loop around the outer-step hole (diloco.h).
#include "diloco.h"

#include <cmath>
#include <iostream>
#include <random>

#include "ch10.h"
#include "dpt/ops.h"
#include "dpt/optim.h"

namespace dpt::ch10 {

DilocoRun train_diloco(Context& ctx, const Options& o, const Dataset& data, MLP& replica, const Diloco& d) {
  DilocoRun out;
  std::vector<Tensor> params = replica.parameters();
  auto inner = make_optimizer(o.optimizer, params, o.lr);  // each rank's own, state included
  std::vector<float> before = flatten(params), momentum(before.size(), 0.0f);  // θ₀ of the round; the outer buffer
  int64_t taken = 0;
  DataParallelStep step = [&](const std::vector<int64_t>& global) {
    Batch batch = gather_batch(data, strided_shard(global, ctx.rank, ctx.world), ctx.device);
    inner->zero_grad();
    Tensor loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
    loss.backward();
    inner->step();  // on this rank's own gradient: nothing sent
    if (++taken % d.inner_steps == 0) {
      std::vector<float> theta = flatten(params);
      diloco_outer_step(ctx.comm, theta, before, momentum, d.outer_lr, d.outer_momentum);  // the hole
      unflatten(theta, params);
      before = theta;
      ++out.outer_steps;
    }
    return loss.item();
  };
  try {
    out.run = run_data_parallel(ctx, o, data, replica, step, "diloco H=" + std::to_string(d.inner_steps));
  } catch (const NotImplemented& e) {  // every rank throws at step H−1, before the outer step's message
    out.written = false, out.not_written = e.what();
    if (ctx.is_root()) std::cout << "  diloco: not written yet (" << e.what() << ")\n";
    return out;
  }
  out.replica_spread = replica_spread(ctx, replica);
  return out;
}

double diloco_outer_error(Communicator& comm, const Diloco& d, uint64_t seed) {
  const std::size_t psi = 64;
  std::vector<float> before(psi, 0.5f), momentum(psi, 0.0f);
  std::vector<double> theta(psi, 0.5), buffer(psi, 0.0);
  auto moved = [&](int r, int t) {  // rank r's parameters after its inner steps of outer step t
    std::mt19937_64 generator(seed + uint64_t(1000 * t + r));
    std::normal_distribution<float> normal(0.0f, 0.1f);
    std::vector<float> x = before;
    for (float& v : x) v += normal(generator);
    return x;
  };
  double gap = 0, largest = 0;
  for (int t = 0; t < 3; ++t) {
    std::vector<double> mean(psi, 0);
    for (int r = 0; r < comm.size(); ++r) {
      const std::vector<float> x = moved(r, t);
      for (std::size_t i = 0; i < psi; ++i) mean[i] += double(x[i]) / comm.size();
    }
    for (std::size_t i = 0; i < psi; ++i) {  // SGD(nesterov=True) on the pseudo-gradient, from θ₀
      const double delta = theta[i] - mean[i];
      buffer[i] = d.outer_momentum * buffer[i] + delta;
      theta[i] -= d.outer_lr * (delta + d.outer_momentum * buffer[i]);
    }
    std::vector<float> params = moved(comm.rank(), t);
    try {
      diloco_outer_step(comm, params, before, momentum, d.outer_lr, d.outer_momentum);  // the hole
    } catch (const NotImplemented&) {
      return std::nan("");
    }
    for (std::size_t i = 0; i < psi; ++i) {
      const double diff = std::fabs(double(params[i]) - theta[i]);
      gap = std::isnan(diff) || std::isnan(gap) ? std::nan("") : std::max(gap, diff);
      largest = std::max(largest, std::fabs(theta[i]));
    }
    before = params;
    for (std::size_t i = 0; i < psi; ++i) theta[i] = params[i];  // the next step starts where the hole ended
  }
  return gap / largest;
}

}  // namespace dpt::ch10
