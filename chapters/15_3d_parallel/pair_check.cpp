// pair_check.cpp — the conjugate pair on integers (pair_check.h). Entry
// (row, c) of a whole (B·T, C) tensor is row·C + c; rank t's positions are
// rows b·T + t·T/tp + τ. No helper of sequence_parallel.cpp is used here.
#include "pair_check.h"

#include <cmath>

#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "dpt/report.h"

namespace dpt::ch15 {

namespace {
constexpr int64_t kPairBatch = 2, kPairWidth = 3;

// Rank t's rows of a (B·T) row tensor, in order.
std::vector<int64_t> my_rows(int64_t T, int t, int tp) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < kPairBatch; ++b)
    for (int64_t tau = 0; tau < T / tp; ++tau) rows.push_back(b * T + t * (T / tp) + tau);
  return rows;
}

// value(row, c) over `rows`, as a (rows, C) tensor on `device`.
template <class Value>
Tensor made(const std::vector<int64_t>& rows, Device& device, Value value) {
  std::vector<float> v;
  for (int64_t r : rows)
    for (int64_t c = 0; c < kPairWidth; ++c) v.push_back(float(value(r, c)));
  return Tensor::from_vector({int64_t(rows.size()), kPairWidth}, v, device);
}

double gap_to(const Tensor& got, const Tensor& want) {
  if (!got.defined() || got.shape() != want.shape()) return NAN;
  const std::vector<float> a = got.to_vector(), b = want.to_vector();
  double gap = 0;
  for (std::size_t i = 0; i < a.size(); ++i) gap = std::max(gap, double(std::fabs(a[i] - b[i])));
  return gap;
}

struct Counts {
  int64_t ag_calls, ag_bytes, rs_calls, rs_bytes, other;
};
Counts counts(Communicator& g) {
  TrafficLog& log = g.traffic();
  const int r = log.rank();
  return {log.collective_calls("all_gather", r), log.collective_bytes("all_gather", r),
          log.collective_calls("reduce_scatter", r), log.collective_bytes("reduce_scatter", r),
          log.collective_calls("all_reduce", r) + log.collective_calls("broadcast", r)};
}

// Pass `i`'s collectives against the contract: one all-gather of `ag` floats
// (gather) or one reduce-scatter of `rs` floats, nothing else.
void judge_pass(int i, const Counts& a, const Counts& b, bool gather, int64_t ag, int64_t rs, PairFindings& out) {
  const int64_t agc = b.ag_calls - a.ag_calls, rsc = b.rs_calls - a.rs_calls;
  out.traffic_ok[i] = (gather ? agc == 1 && rsc == 0 && b.ag_bytes - a.ag_bytes == 4 * ag
                              : rsc == 1 && agc == 0 && b.rs_bytes - a.rs_bytes == 4 * rs) &&
                      b.other == a.other;
  out.traffic[i] = str(agc, " all-gather(s) of ", b.ag_bytes - a.ag_bytes, " bytes, ", rsc, " reduce-scatter(s) of ",
                       b.rs_bytes - a.rs_bytes, " bytes", b.other != a.other ? ", and other traffic" : "");
}
}  // namespace

PairFindings check_sequence_pair(Communicator& group, Device& device) {
  const int t = group.rank(), tp = group.size();
  const int64_t T = 2 * tp, n = kPairBatch * T, local = n / tp * kPairWidth, whole = n * kPairWidth;
  std::vector<int64_t> all(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < n; ++r) all[std::size_t(r)] = r;
  const std::vector<int64_t> mine = my_rows(T, t, tp);
  auto entry = [](int64_t r, int64_t c) { return r * kPairWidth + c; };
  PairFindings out;

  // gather: my rows' entries → the whole tensor; loss Σ (t+1)·(entry+1)·y on
  // each rank, so mine's gradient is Σ_s (s+1)·(entry+1) = tp(tp+1)/2·(entry+1).
  Tensor x = made(mine, device, entry).set_requires_grad(true);
  const Counts c0 = counts(group);
  Tensor y = gather_sequence(group, x, kPairBatch);
  const Counts c1 = counts(group);
  out.gap[0] = gap_to(y, made(all, device, entry));
  backward(sum(mul(y, made(all, device, [&](int64_t r, int64_t c) { return (t + 1) * (entry(r, c) + 1); }))));
  const Counts c2 = counts(group);
  out.gap[1] = gap_to(x.grad(), made(mine, device, [&](int64_t r, int64_t c) { return tp * (tp + 1) / 2 * (entry(r, c) + 1); }));
  judge_pass(0, c0, c1, true, local, 0, out);
  judge_pass(1, c1, c2, false, 0, whole, out);

  // scatter: rank s's term (s+1)·entry → my rows of tp(tp+1)/2·entry; loss
  // Σ (entry+2)·z over my rows, so every rank's term gets (entry+2) on every row.
  Tensor p = made(all, device, [&](int64_t r, int64_t c) { return (t + 1) * entry(r, c); }).set_requires_grad(true);
  const Counts c3 = counts(group);
  Tensor z = scatter_sequence(group, p, kPairBatch);
  const Counts c4 = counts(group);
  out.gap[2] = gap_to(z, made(mine, device, [&](int64_t r, int64_t c) { return tp * (tp + 1) / 2 * entry(r, c); }));
  backward(sum(mul(z, made(mine, device, [&](int64_t r, int64_t c) { return entry(r, c) + 2; }))));
  const Counts c5 = counts(group);
  out.gap[3] = gap_to(p.grad(), made(all, device, [&](int64_t r, int64_t c) { return entry(r, c) + 2; }));
  judge_pass(2, c3, c4, false, 0, whole, out);
  judge_pass(3, c4, c5, true, local, 0, out);
  return out;
}

bool add_pair_verdicts(Context& ctx, Verdicts& v, const PairFindings& mine) {
  float worst[8];
  for (int i = 0; i < 4; ++i)
    worst[i] = std::isnan(mine.gap[i]) ? INFINITY : float(mine.gap[i]), worst[4 + i] = mine.traffic_ok[i] ? 0.0f : 1.0f;
  ctx.comm.all_reduce(worst, 8, ReduceOp::Max);  // every rank's, judged on rank 0
  bool ok = true;
  for (float w : worst) ok = ok && w == 0;
  if (!ctx.is_root()) return ok;
  const char* what[4] = {
      "gather_sequence forward: every rank holds the whole sequence, each position in its row",
      "gather_sequence backward: my positions' gradient = the sum of every rank's copy's gradient there",
      "scatter_sequence forward: rank t holds its positions of the ranks' sum",
      "scatter_sequence backward: every rank's partial gets every position's gradient"};
  const char* moves[4] = {"one all-gather of my positions", "one reduce-scatter of B·T·C floats",
                          "one reduce-scatter of B·T·C floats", "one all-gather of my positions"};
  for (int i = 0; i < 4; ++i)
    v.holds(str(what[i], " (exact, integers), by ", moves[i], " and nothing else"), worst[i] == 0 && worst[4 + i] == 0,
            str("max |Δ| over the ranks ", worst[i], "; rank 0's traffic: ", mine.traffic[i]));
  return ok;
}

}  // namespace dpt::ch15
