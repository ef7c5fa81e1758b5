// checks.cpp — chapter 12's checks beside the lecture (checks.h).
#include "checks.h"

#include <cmath>
#include <iostream>

#include "ch12.h"
#include "dpt/data_parallel.h"
#include "dpt/grid.h"
#include "dpt/ops.h"
#include "dpt/step_check.h"

namespace dpt::ch12 {

Layout layout(int tp_flag, int dp_flag, int world) {
  Layout l;
  if (tp_flag > 0 && dp_flag > 0 && tp_flag * dp_flag != world)
    l.problem = grid_problem({{"tp", tp_flag, "--tp"}, {"dp", dp_flag, "--dp"}}, world);
  else if (tp_flag > 0 && world % tp_flag != 0) l.problem = str("--tp ", tp_flag, " does not divide the ", ranks_phrase(world));
  else if (dp_flag > 0 && world % dp_flag != 0) l.problem = str("--dp ", dp_flag, " does not divide the ", ranks_phrase(world));
  l.tp = tp_flag > 0 ? tp_flag : world / (dp_flag > 0 ? dp_flag : 1);
  l.dp = world / l.tp;
  return l;
}

double world_max(Context& ctx, double x) {
  float v = std::isnan(x) ? INFINITY : float(std::fabs(x));  // a NaN must win the Max on every rank: inf does
  ctx.comm.all_reduce(&v, 1, ReduceOp::Max);
  return v;
}

void say_verdict_now(const Narrator& say, const Verdicts& v) {
  const Verdict& last = v.all().back();
  if (last.vacuous) return say.say(str("  \u2014 ", last.what, " \u2014 cannot fail ", last.why));
  const std::string bound = last.bound.empty() ? "" : " (expected " + last.bound + ")";  // as the closing list prints it
  say.say(str(last.passed ? "  \u2714 " : "  \u2718 ", last.what, ": ", last.measured, bound, last.passed ? "" : " — " + last.why));
}

namespace {
// Where parameter k's slice (rank t of T) sits in the full tensor: its shape,
// and the full entry of its entry (0, 0). Parameters come per pair: column W,
// column b, row W, row b (the row bias whole).
struct SliceBox {
  int64_t rows, cols, row0, col0, in;
};
SliceBox box_of(std::size_t k, const Tensor& whole, int t, int T) {
  const bool column = (k / 2) % 2 == 0, weight = k % 2 == 0;
  const int64_t out = whole.size(0), in = weight ? whole.size(1) : 1;
  const int64_t rows = column ? out / T : out, cols = column || !weight ? in : in / T;
  return {rows, cols, column ? t * rows : 0, column || !weight ? 0 : t * cols, in};
}
}  // namespace

SliceGaps slices_against_full(const TensorParallelMLP& model, const MLP& full, int t, int T) {
  const std::vector<Tensor> slices = model.parameters();  // per pair: column W, column b, row W, row b
  const std::vector<Tensor> whole = full.parameters();    // fc0.weight, fc0.bias, fc1.weight, …
  if (slices.size() != whole.size()) return {NAN, NAN};
  SliceGaps gaps;
  for (std::size_t k = 0; k < whole.size(); ++k) {
    double& worst = k % 4 < 2 ? gaps.output : gaps.input;
    if (std::isnan(worst)) continue;
    const SliceBox b = box_of(k, whole[k], t, T);
    const std::vector<float> s = slices[k].to_vector();
    if (int64_t(s.size()) != b.rows * b.cols) {
      worst = NAN;
      continue;
    }
    const float* f = whole[k].data();
    for (int64_t i = 0; i < b.rows && !std::isnan(worst); ++i)
      for (int64_t j = 0; j < b.cols; ++j) {
        const double gap = std::fabs(double(s[std::size_t(i * b.cols + j)]) - double(f[(b.row0 + i) * b.in + b.col0 + j]));
        worst = std::isnan(gap) ? NAN : std::max(worst, gap);
      }
  }
  return gaps;
}

double gathered_against_full(Communicator& group, const MLP& full, Device& device) {
  const int t = group.rank(), T = group.size();
  const std::vector<Tensor> whole = full.parameters();
  double worst = 0;
  bool shapes_ok = true;  // every rank gathers every tensor, whatever it finds: no rank is left waiting
  for (std::size_t k = 0; k < whole.size(); ++k) {
    if (k % 4 == 3) continue;  // a row-parallel bias is whole on every rank: nothing to gather
    const SliceBox b = box_of(k, whole[k], t, T);
    std::vector<float> mine(std::size_t(b.rows * b.cols));
    const float* f = whole[k].data();
    for (int64_t i = 0; i < b.rows; ++i)
      for (int64_t j = 0; j < b.cols; ++j) mine[std::size_t(i * b.cols + j)] = f[(b.row0 + i) * b.in + b.col0 + j];
    const Shape shape = whole[k].dim() == 2 ? Shape{b.rows, b.cols} : Shape{b.rows};
    const Split split = (k / 2) % 2 == 0 ? Split::Output : Split::Input;
    const Tensor back = gather_weight(group, Tensor::from_vector(shape, mine, device), split);
    if (back.shape() != whole[k].shape()) shapes_ok = false;
    else worst = std::max(worst, max_abs_difference(back.to_vector(), whole[k].to_vector()));
  }
  return shapes_ok ? worst : NAN;
}

ColumnProbe column_input_gradient(Communicator& group, Device& device) {
  const int T = group.size(), t = group.rank();
  const int64_t B = 3, in = 5, k = 4, out = k * T;
  auto value = [](int64_t i, int salt) { return float((i * 7 + salt) % 15 - 7) / 8.0f; };  // -7/8 … 7/8
  std::vector<float> x(std::size_t(B * in)), w(std::size_t(out * in)), r(std::size_t(B * out));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = value(int64_t(i), 1);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = value(int64_t(i), 4);
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = value(int64_t(i), 9);
  std::vector<float> w_t(w.begin() + t * k * in, w.begin() + (t + 1) * k * in), r_t(std::size_t(B * k));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < k; ++j) r_t[std::size_t(b * k + j)] = r[std::size_t(b * out + t * k + j)];
  Tensor xs = Tensor::from_vector({B, in}, x, device), ws = Tensor::from_vector({k, in}, w_t, device);
  Tensor bs = Tensor::zeros({k}, device);
  xs.set_requires_grad(true), ws.set_requires_grad(true), bs.set_requires_grad(true);
  ColumnProbe probe;
  Tensor y = column_parallel_linear(group, xs, ws, bs);
  if (y.shape() != Shape{B, k}) return {NAN, NAN};  // the layers' tests name the shape
  sum(mul(y, Tensor::from_vector({B, k}, r_t, device))).backward();
  if (!xs.grad().defined()) return {NAN, NAN};
  const std::vector<float> dx = xs.grad().to_vector();
  double dot = 0, norm = 0, gap = 0, largest = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < in; ++i) {
      double one = 0;  // one device: (r · W)[b, i]
      for (int64_t j = 0; j < out; ++j) one += double(r[std::size_t(b * out + j)]) * w[std::size_t(j * in + i)];
      const double mine = dx[std::size_t(b * in + i)];
      dot += mine * one, norm += one * one;
      gap = std::max(gap, std::fabs(mine - one)), largest = std::max(largest, std::fabs(one));
    }
  probe.gap = largest > 0 ? gap / largest : gap;
  probe.ratio = norm > 0 ? dot / norm : NAN;
  return probe;
}

void judge_column_input_gradient(Context& ctx, Groups& groups, Verdicts& v, const std::string& one_rank) {
  const char* const what = "column layer: x's gradient = one device's d loss/dx on every rank";
  const int T = groups.tp_size();
  if (T == 1) return v.cannot_fail(what, one_rank);
  const ColumnProbe probe = column_input_gradient(groups.tp(), ctx.device);
  const double gap = world_max(ctx, probe.gap);
  v.at_most(what, gap, kColumnProbeTolerance,
            gap <= kColumnProbeTolerance
                ? "a stand-in layer with values exact in float: x's gradient, from every rank's block, is one device's"
                : str("a stand-in layer: rank 0's x gradient, projected on one device's d loss/dx, is ",
                      fmt(probe.ratio, 3), " x it (T = ", T, "). 1 is the whole d loss/dx, which x, replicated, "
                      "needs on every rank; 1/T is the size of one rank's share of it (the T ranks' shares sum to "
                      "the whole), or of the shares' mean; T, T copies of the whole"));
}

std::string combining_cause(Context& ctx, Groups& groups, TensorParallelMLP& model, const Options& o,
                            const Dataset& data, bool slices_ok) {
  std::vector<int64_t> first(std::size_t(std::min<int64_t>(o.batch, data.size())));
  for (std::size_t i = 0; i < first.size(); ++i) first[i] = int64_t(i);
  Batch batch = gather_batch(data, first, ctx.device);
  Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);
  loss.backward();
  const std::vector<float> tp = gather_model_flat(groups.tp(), model.widths(), gradients_of(model.pieces()));
  if (!ctx.is_root()) return "";
  if (!slices_ok)  // an earlier hole's mistake, in its own words
    return "the slices are not the flags' model (section 2's verdicts: shard_weight, gather_weight), so neither "
           "the split model nor its gathered gradients are one device's";

  MLP one = build_model(o, Device::host());  // the flags' model: what the slices were cut from
  Batch host = gather_batch(data, first, Device::host());
  Tensor one_loss = softmax_cross_entropy(one.forward(host.x), host.y);
  one_loss.backward();
  const double loss_gap = std::fabs(double(loss.item()) - one_loss.item()) / std::fabs(double(one_loss.item()));
  if (!(loss_gap <= kForwardTolerance))
    return str("the split model's forward is not one device's (step 0's loss off by ", fmt(loss_gap, 3),
               " relative, T = ", groups.tp_size(), "): a layer's forward is not the unsplit layer's (each layer's "
               "test compares it with one device's)");
  const std::vector<NamedTensor> named = one.named_parameters();
  std::string worst_name;
  double worst_gap = 0, worst_ratio = 1;
  std::size_t at = 0;
  for (const NamedTensor& p : named) {
    const std::vector<float> g = p.tensor.grad().to_vector();
    double dot = 0, norm = 0, gap = 0, largest = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double mine = at + i < tp.size() ? tp[at + i] : NAN;
      dot += mine * g[i], norm += double(g[i]) * g[i];
      gap = std::max(gap, std::fabs(mine - g[i])), largest = std::max(largest, std::fabs(double(g[i])));
    }
    at += g.size();
    const double relative = largest > 0 ? gap / largest : gap;
    if (relative > worst_gap || std::isnan(relative))
      worst_gap = relative, worst_name = p.name, worst_ratio = norm > 0 ? dot / norm : NAN;
  }
  const int T = groups.tp_size();
  if (worst_gap <= kStepGradientTolerance)
    return groups.dp_size() > 1 ? "the data-parallel ranks did not average their slices' gradients (the TP group's "
                                  "gradient at step 0 is one device's)"
                                : "the tensor-parallel group did not combine its partial results as one device would";
  const std::string ratio = str(worst_name, "'s gradient at step 0 is ", fmt(worst_ratio, 3), " x one device's (T = ", T, ")");
  if (worst_ratio > 1.05)
    return "the tensor-parallel group combined too much: " + ratio + " — a sum where a gradient was already whole?";
  if (worst_ratio < 0.95)
    return "the tensor-parallel group combined too little: " + ratio + " — one rank's share where the whole was needed?";
  return "the tensor-parallel group combined the wrong partial results: " + ratio +
         ", but entries differ by " + fmt(worst_gap, 3) + " of the largest";
}

}  // namespace dpt::ch12
