// tp_checks.cpp — chapter 15's verdicts (tp_checks.h).
#include "tp_checks.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "dpt/autograd.h"
#include "dpt/report.h"
#include "dpt/text_windows.h"
#include "lm_training.h"

namespace dpt::ch15 {

namespace {
double world_max(Context& ctx, double x) {
  float v = std::isnan(x) ? INFINITY : float(std::fabs(x));  // a NaN must win the Max on every rank: inf does
  ctx.comm.all_reduce(&v, 1, ReduceOp::Max);
  return v;
}

}  // namespace

double replicas_spread(Context& ctx, const TensorParallelGpt& model) {
  const std::vector<float> mine = model.gather(false);
  std::vector<float> root = mine;
  ctx.comm.broadcast(root.data(), int64_t(root.size()), 0);
  double spread = 0;
  for (std::size_t i = 0; i < mine.size(); ++i) spread = std::max(spread, double(std::fabs(mine[i] - root[i])));
  return world_max(ctx, spread);
}

namespace {
// Chapter 14's unsplit model on one device: the gradient of step `c.step`'s G
// windows from c's weights; `names` gets each flat entry's parameter name.
std::vector<float> one_device_gradient(const GptShape& shape, const CheckedStep& c, const Corpus& text,
                                       const Ch14Flags& f, int64_t G, std::vector<std::string>& names) {
  Rng unused(0);
  Gpt one(shape, Device::host(), unused);
  set_flat_values(one, c.weights_before);
  const WindowSampler sampler(int64_t(text.train.size()), shape.context, G, !f.no_shuffle, f.seed);
  TokenBatch all = window_batch(text.train, sampler.starts(c.step), shape.context);
  one.loss(all.inputs, all.targets, G).backward();
  std::vector<float> out;
  for (const NamedTensor& p : one.named_parameters()) {
    const std::vector<float> g = p.tensor.grad().to_vector();
    out.insert(out.end(), g.begin(), g.end());
    names.insert(names.end(), g.size(), p.name);
  }
  return out;
}
}  // namespace

void add_step_verdicts(Verdicts& v, const TpRun& run, const Corpus& text, const Ch14Flags& f, int dp) {
  for (const CheckedStep& c : run.checked) {
    std::vector<std::string> names;
    const std::vector<float> expected = one_device_gradient(f.shape, c, text, f, f.batch * dp, names);
    double diff = expected.size() == c.averaged_gradient.size() ? 0 : NAN, scale = 0;
    std::size_t worst = 0;
    for (std::size_t i = 0; i < expected.size() && !std::isnan(diff); ++i) {
      const double d = std::fabs(double(expected[i]) - double(c.averaged_gradient[i]));
      if (!(d <= diff)) diff = d, worst = i;  // a NaN entry is the worst too
      scale = std::max(scale, double(std::fabs(expected[i])));
    }
    const std::string where = std::isnan(diff) || diff / scale > 1e-4 ? "; furthest off: " + names[worst] : "";
    v.at_most(str("step ", c.step, ": the shares' gradients, gathered and averaged = one device's on the global batch "
                  "(max |Δ| / max |g|)"),
              diff / scale, 1e-4,
              "the same sums in another order: ~1e-6 relative; a share counted twice or lost is off by tenths" + where);
  }
}

void add_size_verdicts(Context& ctx, Verdicts& v, const TensorParallelGpt& model, const TpRun& run, int tp, int dp,
                       bool trained) {
  int64_t mine = 0;
  for (const Tensor& p : model.parameters()) mine += p.numel();
  const int64_t formula = parameters_per_rank(model.shape(), tp);
  const double gap = world_max(ctx, double(mine - formula));
  if (!ctx.is_root()) return;
  v.at_most(str("parameters per rank = (12·L·C² + 7·L·C)/tp + 6·L·C + 2·V·C + T·C + 2·C = ", formula,
                " (whole model ", parameters_per_rank(model.shape(), 1), ")"),
            gap, 0, "counted tensor by tensor on every rank: exact");
  if (!trained) return;
  if (dp == 1)
    v.cannot_fail("DP all-reduce bytes per step = 4 x parameters per rank", "with --dp 1 (try --dp 2)");
  else
    v.near("DP all-reduce bytes per step = 4 x parameters per rank", run.dp_bytes_per_step, 4.0 * double(formula), 0,
           "each DP group averages its share's gradients once per step, from its traffic log");
}

void add_traffic_verdicts(Verdicts& v, const TpRun& run, const GptShape& shape, int64_t batch, int tp) {
  const double L = double(shape.layers), floats = double(batch * shape.context * shape.width);
  for (const auto& [pass, measured] : {std::pair<const char*, AllReduces>{"forward", run.forward},
                                       std::pair<const char*, AllReduces>{"backward", run.backward}}) {
    const std::string calls = str(pass, ": TP all-reduces per step = 2 per block x L = ", fmt(2 * L, 3));
    const std::string size = str(pass, ": floats per TP all-reduce = B·T·C = ", fmt(floats, 6));
    if (tp == 1) {
      v.cannot_fail(calls, "with --tp 1 (try --tp 2)");
      continue;
    }
    v.near(calls, measured.calls, 2 * L, 0, "counted in the TP group's traffic log, per step");
    v.near(size, measured.calls > 0 ? measured.bytes / 4 / measured.calls : 0, floats, 0,
           "the residual stream's activations (forward) or their gradient (backward), from the log's bytes / 4 / calls");
  }
}

void add_sequence_parallel_verdicts(Verdicts& v, const TpRun& run, const GptShape& s, int64_t batch, int tp) {
  const double L = double(s.layers), C = double(s.width), whole = double(batch * s.context * s.width);
  // A ring moves 2(tp−1)/tp of an all-reduce's payload per rank, (tp−1)/tp of a
  // reduce-scatter's input and (tp−1) times an all-gather's contribution.
  const double ring_all_reduces = 2 * L * 2 * (tp - 1) / double(tp) * whole * 4;
  for (const auto& [pass, m, ar] : {std::tuple<const char*, Collectives, AllReduces>{"forward", run.sp_forward, run.forward},
                                    std::tuple<const char*, Collectives, AllReduces>{"backward", run.sp_backward, run.backward}}) {
    const std::string p = pass;
    v.near(p + ": --sp all-gathers per step = 2 per block x L = " + fmt(2 * L, 3), m.all_gather.calls, 2 * L, 0,
           "f before c_attn and c_fc (forward), g's conjugate (backward): the TP group's traffic log");
    v.near(p + ": --sp reduce-scatters per step = 2 per block x L = " + fmt(2 * L, 3), m.reduce_scatter.calls, 2 * L, 0,
           "g after both c_proj (forward), f's conjugate (backward)");
    v.near(p + ": --sp TP all-reduces in the pass = 0", ar.calls, 0, 0, "the pair replaces them");
    v.near(p + ": floats per all-gather = B·T·C/tp = " + fmt(whole / tp, 6),
           m.all_gather.calls > 0 ? m.all_gather.bytes / 4 / m.all_gather.calls : 0, whole / tp, 0,
           "each rank sends its T/tp positions");
    v.near(p + ": floats per reduce-scatter = B·T·C = " + fmt(whole, 6),
           m.reduce_scatter.calls > 0 ? m.reduce_scatter.bytes / 4 / m.reduce_scatter.calls : 0, whole, 0,
           "each rank's partial sums of every position");
    v.near(p + ": ring bytes per rank = tensor parallelism's 2 all-reduces per block = 2L·2(tp−1)/tp·B·T·C·4 = " +
               fmt(ring_all_reduces, 8),
           (tp - 1) * m.all_gather.bytes + (tp - 1) / double(tp) * m.reduce_scatter.bytes, ring_all_reduces, 1e-12,
           "an all-reduce is a reduce-scatter then an all-gather: from the log's payloads, (tp−1)·AG + (tp−1)/tp·RS");
  }
  const double replicated = 6 * L * C + 2 * double(s.vocab) * C + double(s.context) * C + 2 * C;
  v.near("--sp: replicated gradients summed over the TP group per step = 6·L·C + 2·V·C + T·C + 2·C = " +
             fmt(replicated, 6) + " floats",
         run.sp_grad_floats, replicated, 0, "each rank's embeddings, LayerNorms, c_proj biases and head saw T/tp positions");
  v.near("--sp: embeddings, LayerNorms and residual adds held per rank x tp = without --sp (memory ledger, bytes)",
         run.region_bytes * tp, run.region_bytes_without_sp, 0,
         str(format_bytes(run.region_bytes), " with --sp, ", format_bytes(run.region_bytes_without_sp),
             " without, on step 0's batch: activations, not parameters, are what sequence parallelism splits"));
}

}  // namespace dpt::ch15
