// tp_checks.cpp — chapter 15's verdicts (tp_checks.h).
#include "tp_checks.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "dpt/autograd.h"
#include "dpt/report.h"
#include "dpt/text_windows.h"
#include "lm_training.h"
#include "pipeline_clock.h"
#include "stage.h"

namespace dpt::ch15 {

namespace {
double world_max(Context& ctx, double x) {
  float v = std::isnan(x) ? INFINITY : float(std::fabs(x));  // a NaN must win the Max on every rank: inf does
  ctx.comm.all_reduce(&v, 1, ReduceOp::Max);
  return v;
}

}  // namespace

double replicas_spread(Context& ctx, const std::vector<float>& mine) {
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

void add_step_verdicts(Verdicts& v, const TpRun& run, const Corpus& text, const Ch14Flags& f, int dp,
                       int micro_batches) {
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
    const bool off = std::isnan(diff) || diff / scale > 1e-4;
    std::string where = off ? "; furthest off: " + names[worst] : "";
    if (off && micro_batches > 1)
      where += str("; ", micro_batches, " micro-batches: does your chapter 13 accumulate_micro_batch give the batch's mean?");
    v.at_most(str("step ", c.step, ": the shares' gradients, gathered and averaged = one device's on the global batch "
                  "(max |Δ| / max |g|)"),
              diff / scale, 1e-4,
              "the same sums in another order: ~1e-6 relative; a share counted twice or lost is off by tenths" + where);
  }
}

int64_t counted_share_parameters(const Gpt& full, int tp, int stage, int stages) {
  // A block's tensors a TP group shares out (tp_gpt.h's TpBlock); every other tensor is whole on each rank.
  static const char* const shared_out[] = {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                                           "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight"};
  const ch13::LayerRange blocks = ch13::stage_layers(full.shape().layers, stages, stage);
  const std::string block_prefix = "transformer.h.";
  int64_t count = 0;
  for (const NamedTensor& named : full.named_parameters()) {
    const std::string& name = named.name;
    bool here = false, shared = false;
    if (name.rfind(block_prefix, 0) == 0) {
      const int layer = std::stoi(name.substr(block_prefix.size()));
      here = layer >= blocks.first && layer < blocks.last;
      for (const std::string tail : shared_out)
        shared = shared || (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0);
    } else if (name.rfind("transformer.wte", 0) == 0 || name.rfind("transformer.wpe", 0) == 0) {
      here = stage == 0;
    } else {
      here = stage + 1 == stages;  // ln_f, lm_head
    }
    if (here) count += shared ? named.tensor.numel() / tp : named.tensor.numel();
  }
  return count;
}

void add_size_verdicts(Context& ctx, Verdicts& v, const TensorParallelGpt& model, const Gpt& full, const TpRun& run,
                       int tp, int dp, bool trained) {
  int64_t mine = 0;
  for (const Tensor& p : model.parameters()) mine += p.numel();
  const int64_t formula = counted_share_parameters(full, tp, model.stage(), model.stages());
  const double gap = world_max(ctx, double(mine - formula));
  const double dp_gap = trained && dp > 1 ? world_max(ctx, run.dp_bytes_per_step - 4.0 * double(formula)) : 0;
  if (!ctx.is_root()) return;
  const std::string stage = model.stages() > 1 ? " on stage 0" : "";
  v.at_most(str("parameters per rank = its stage's tensors of the whole model, each shared out or whole = ", formula,
                stage, " (whole model ", counted_share_parameters(full, 1, 0, 1), ")"),
            gap, 0, "its share's tensors counted on every rank against the whole model's, tensor by tensor: exact");
  if (!trained) return;
  if (dp == 1)
    v.cannot_fail("DP all-reduce bytes per step = 4 x parameters per rank", "with --dp 1 (try --dp 2)");
  else
    v.at_most("DP all-reduce bytes per step = 4 x parameters per rank (every rank, largest |measured - count|)", dp_gap, 0,
              str("each DP group averages its share's gradients once per step, after the last micro-batch, from its "
                  "traffic log; rank 0: ", format_bytes(run.dp_bytes_per_step)));
}

namespace {
// |measured − expected| / max(|expected|, 1), the largest over the world.
double every_rank_gap(Context& ctx, double measured, double expected) {
  return world_max(ctx, std::fabs(measured - expected) / std::max(std::fabs(expected), 1.0));
}
double per_call(const AllReduces& a) { return a.calls > 0 ? a.bytes / 4 / a.calls : 0; }
int stage_blocks(const TensorParallelGpt& model) { return int(model.blocks().size()); }
}  // namespace

void add_traffic_verdicts(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model, int64_t batch,
                          int micro_batches) {
  const GptShape& shape = model.shape();
  const int tp = model.group().size(), M = micro_batches;
  const double L = stage_blocks(model), floats = double(batch / M * shape.context * shape.width);
  for (const auto& [pass, measured] : {std::pair<const char*, AllReduces>{"forward", run.forward},
                                       std::pair<const char*, AllReduces>{"backward", run.backward}}) {
    const double calls_gap = every_rank_gap(ctx, measured.calls, 2 * L * M);
    const double size_gap = every_rank_gap(ctx, per_call(measured), floats);
    if (!ctx.is_root()) continue;
    const std::string per = M > 1 || model.stages() > 1 ? "blocks of the stage x M" : "L";
    const std::string calls = str(pass, ": TP all-reduces per step = 2 per block x ", per, " = ", fmt(2 * L * M, 3));
    const std::string size = str(pass, ": floats per TP all-reduce = ", M > 1 ? "B/M·T·C" : "B·T·C", " = ", fmt(floats, 6));
    if (tp == 1) {
      v.cannot_fail(calls, "with --tp 1 (try --tp 2)");
      continue;
    }
    v.at_most(calls, calls_gap, 0, "counted in the TP group's traffic log, per step, on every rank against its stage (rank 0's shown)");
    v.at_most(size, size_gap, 0,
              "the residual stream of one micro-batch (forward) or its gradient (backward), from the log's bytes / 4 / calls");
  }
}

void add_sequence_parallel_verdicts(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model,
                                    int64_t batch, int micro_batches) {
  const GptShape& s = model.shape();
  const int tp = model.group().size(), M = micro_batches;
  const double L = stage_blocks(model), whole = double(batch / M * s.context * s.width);
  // A ring moves 2(tp−1)/tp of an all-reduce's payload per rank, (tp−1)/tp of a
  // reduce-scatter's input and (tp−1) times an all-gather's contribution.
  const double ring_all_reduces = 2 * L * M * 2 * (tp - 1) / double(tp) * whole * 4;
  const std::string b = M > 1 ? "B/M·T·C" : "B·T·C";
  const std::string per = M > 1 || model.stages() > 1 ? "blocks of the stage x M" : "L";
  const std::string ring = M > 1 || model.stages() > 1 ? "2·L_s·M" : "2L";  // L_s: the stage's blocks
  // Each check on every rank, judged on rank 0 by the largest relative gap.
  auto check = [&](const std::string& what, double measured, double expected, double tolerance, const std::string& why) {
    const double gap = every_rank_gap(ctx, measured, expected);
    if (ctx.is_root()) v.at_most(what, gap, tolerance, why);
  };
  for (const auto& [pass, m, ar] : {std::tuple<const char*, Collectives, AllReduces>{"forward", run.sp_forward, run.forward},
                                    std::tuple<const char*, Collectives, AllReduces>{"backward", run.sp_backward, run.backward}}) {
    const std::string p = pass;
    check(p + ": --sp all-gathers per step = 2 per block x " + per + " = " + fmt(2 * L * M, 3), m.all_gather.calls,
          2 * L * M, 0, "f before c_attn and c_fc (forward), g's conjugate (backward): the TP group's traffic log");
    check(p + ": --sp reduce-scatters per step = 2 per block x " + per + " = " + fmt(2 * L * M, 3),
          m.reduce_scatter.calls, 2 * L * M, 0, "g after both c_proj (forward), f's conjugate (backward)");
    check(p + ": --sp TP all-reduces in the pass = 0", ar.calls, 0, 0, "the pair replaces them");
    check(p + ": floats per all-gather = " + b + "/tp = " + fmt(whole / tp, 6), per_call(m.all_gather), whole / tp, 0,
          "each rank sends its T/tp positions");
    check(p + ": floats per reduce-scatter = " + b + " = " + fmt(whole, 6), per_call(m.reduce_scatter), whole, 0,
          "each rank's partial sums of every position");
    check(p + ": ring bytes per rank = tensor parallelism's 2 all-reduces per block = " + ring + "·2(tp−1)/tp·" + b +
              "·4 = " + fmt(ring_all_reduces, 8),
          (tp - 1) * m.all_gather.bytes + (tp - 1) / double(tp) * m.reduce_scatter.bytes, ring_all_reduces, 1e-12,
          "an all-reduce is a reduce-scatter then an all-gather: from the log's payloads, (tp−1)·AG + (tp−1)/tp·RS");
  }
  double replicated = 0;  // the share's whole tensors, counted from the model (not the run's log)
  for (const Tensor& whole_tensor : model.replicated_parameters()) replicated += double(whole_tensor.numel());
  check(str("--sp: replicated gradients summed over the TP group per step = the stage's whole tensors' entries",
            model.stages() > 1 ? " (each stage its part)" : "", " = ", fmt(replicated, 6), " floats"),
        run.sp_grad_floats, replicated, 0, "each rank's embeddings, LayerNorms, c_proj biases and head saw T/tp positions");
  check("--sp: embeddings, LayerNorms and residual adds held per rank x tp = without --sp (memory ledger, bytes)",
        run.region_bytes * tp, run.region_bytes_without_sp, 0,
        str(format_bytes(run.region_bytes), " with --sp, ", format_bytes(run.region_bytes_without_sp),
            " without (rank 0), on step 0's batch: activations, not parameters, are what sequence parallelism splits"));
}

void add_pipeline_bytes_verdict(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model,
                                int64_t batch, int micro_batches, bool sp) {
  const GptShape& s = model.shape();
  const int M = micro_batches, tp = model.group().size();
  const double floats = double(batch / M * s.context * s.width) / (sp ? tp : 1);
  const int neighbours = (model.has_embeddings() ? 0 : 1) + (model.has_head() ? 0 : 1);
  const double expected = M * neighbours * floats * 4;
  const double gap = every_rank_gap(ctx, run.pp_bytes_per_step, expected);
  if (!ctx.is_root()) return;
  const std::string what = str("PP bytes sent per step per rank = M x ", sp ? "B/M·T·C/tp" : "B/M·T·C",
                               " floats x 4 to each neighbour stage (rank 0: ", fmt(expected, 6), ")");
  if (model.stages() == 1)
    v.cannot_fail(what, "with --pp 1 (try --pp 2)");
  else
    v.at_most(what, gap, 0,
              str("every rank against its own neighbours, from the pipeline's traffic log: activations forward, their "
                  "gradients back", sp ? ", each TP rank its positions" : ", each TP rank the whole stream"));
}

void add_bubble_verdict(Verdicts& v, const TpRun& run, int stages, int micro_batches, const std::string& schedule) {
  const std::string what = str("the stages' schedule (", schedule, ") on chapter 13's clock: bubble = (P-1)/(M+P-1) = ",
                               fixed(100 * ch13::bubble_formula(stages, micro_batches), 2), " %");
  if (stages == 1) {
    v.cannot_fail(what, "with --pp 1 (try --pp 2)");
    return;
  }
  double bubble = NAN;
  try {  // a schedule that cannot finish is a dpt::Error from the replay: the verdict says so
    const ch13::Timeline t = ch13::replay_pipeline(run.ran_by_stage, [](int, const ch13::Op& op) {
      return op.pass == ch13::Pass::Forward ? 1.0 : 2.0;
    });
    bubble = ch13::bubble_fraction(t);
  } catch (const Error&) {
  }
  v.near(what, bubble, ch13::bubble_formula(stages, micro_batches), 1e-9,
         "the ops each stage ran in step 0, in their order, replayed with forward 1 and backward 2");
  if (std::isnan(bubble)) return;
  const ch13::Timeline measured = ch13::replay_pipeline(run.ran_by_stage, [&run](int s, const ch13::Op& op) {
    const std::vector<ch13::Op>& ran = run.ran_by_stage[std::size_t(s)];
    const auto at = std::find(ran.begin(), ran.end(), op) - ran.begin();
    return run.seconds_by_stage[std::size_t(s)][std::size_t(at)];
  });
  v.report("the same ops at their measured seconds: bubble", ch13::bubble_fraction(measured),
           "the first stage also embeds, the last runs the head, and the machine is shared: not judged");
}

}  // namespace dpt::ch15
