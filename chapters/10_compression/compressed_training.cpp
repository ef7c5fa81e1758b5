// compressed_training.cpp — the compressed gradient sync and its bookkeeping
// (compressed_training.h).
#include "compressed_training.h"

#include <cmath>
#include <iostream>

#include "ch10.h"
#include "dpt/check.h"
#include "dpt/holes.h"
#include "dpt/ops.h"

namespace dpt::ch10 {

std::vector<Shape> parameter_shapes(const MLP& model) {
  std::vector<Shape> shapes;
  for (const Tensor& p : model.parameters()) shapes.push_back(p.shape());
  return shapes;
}

namespace {
// A compressor that adds up, in double, what its reduce reported delivered
// of this rank's input: the books error feedback's invariant is checked on.
class DeliveredBook : public Compressor {
 public:
  DeliveredBook(std::unique_ptr<Compressor> inner, std::size_t psi) : inner_(std::move(inner)), sum(psi, 0) {}
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    inner_->reduce(comm, x, delivered);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += delivered[i];
  }
  std::string name() const override { return inner_->name(); }

 private:
  std::unique_ptr<Compressor> inner_;

 public:
  std::vector<double> sum;  ///< Σ_t delivered_t
};
}  // namespace

CompressedRun train_compressed(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                               const Setting& setting, StepRecorder* recorder) {
  CompressedRun out;
  out.setting = setting;
  const std::size_t psi = std::size_t(replica.num_parameters());
  auto book = std::make_unique<DeliveredBook>(make_compressor(setting.compress, parameter_shapes(replica), o.seed), psi);
  Compressor* compressor = book.get();
  // This rank's books, in double: Σ own gradient; the residual it carries.
  std::vector<double> sum_grad(psi, 0);
  std::vector<float> residual(psi, 0), delivered;
  double bound = 0;
  const double u = 4 * std::ldexp(1.0, -24);
  GradientSync sync = [&](Context& c, std::vector<Tensor>& grads) {
    std::vector<float> g = flatten(grads);
    double largest = 0, carried = 0;
    for (std::size_t i = 0; i < psi; ++i) {
      sum_grad[i] += g[i];
      largest = std::max(largest, double(std::fabs(g[i])));
      carried = std::max(carried, double(std::fabs(residual[i])));
    }
    bound += u * (largest + carried);
    if (setting.error_feedback) error_feedback_step(c.comm, *compressor, g, residual);  // the hole
    else compressor->reduce(c.comm, g, delivered);
    unflatten(g, grads);
  };
  const std::string hole = unwritten_hole(  // an unwritten hole throws on every rank at step 0, before its first message
      ctx.comm, [&] { out.run = train_data_parallel(ctx, o, data, replica, sync, setting.name(), strided_shard, recorder); });
  if (!hole.empty()) {
    out.written = false, out.not_written = hole;
    if (ctx.is_root()) std::cout << "  " << setting.name() << ": not written yet (" << hole << ")\n";
    return out;
  }
  out.steps = int64_t(out.run.losses.size());
  // After the loop (its traffic is already gathered): the invariant on this
  // rank, then the largest over ranks (NaN wins).
  float gap = 0, largest_residual = 0, b = float(bound);
  for (std::size_t i = 0; i < psi; ++i) {
    const float d = float(std::fabs(book->sum[i] + double(residual[i]) - sum_grad[i]));
    gap = std::isnan(d) || std::isnan(gap) ? NAN : std::max(gap, d);
    largest_residual = std::max(largest_residual, std::fabs(residual[i]));
  }
  for (float* value : {&gap, &b, &largest_residual}) ctx.comm.all_reduce(value, 1, ReduceOp::Max);
  out.invariant_gap = gap, out.invariant_bound = b, out.largest_residual = largest_residual;
  out.replica_spread = dpt::replica_spread(ctx, replica);
  return out;
}

}  // namespace dpt::ch10
