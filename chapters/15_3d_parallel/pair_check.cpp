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

// One rank's collectives so far, and the bytes they move per rank on a ring
// (chapter 04's counts): an all-gather (tp−1)·its contribution, a
// reduce-scatter (tp−1)/tp of its input, an all-reduce twice that, a
// broadcast its payload.
struct PairCounts {
  int64_t calls, sent;
  double ring_bytes;
  std::string named;
};
PairCounts pair_counts(Communicator& g) {
  TrafficLog& log = g.traffic();
  const int r = log.rank(), tp = g.size();
  const double share = double(tp - 1) / tp;
  PairCounts c{0, log.bytes_sent(r), 0, ""};
  for (const auto& [name, per_byte] : {std::pair<const char*, double>{"all_gather", double(tp - 1)},
                                       {"reduce_scatter", share}, {"all_reduce", 2 * share}, {"broadcast", 1.0}}) {
    const int64_t n = log.collective_calls(name, r);
    c.calls += n, c.ring_bytes += per_byte * double(log.collective_bytes(name, r));
    if (n > 0) c.named += str(c.named.empty() ? "" : ", ", n, " ", name);
  }
  return c;
}

// Pass `i` against the contract: one collective call moving `want` ring bytes per rank, nothing else.
void judge_pass(int i, const PairCounts& a, const PairCounts& b, double want, PairFindings& out) {
  const int64_t calls = b.calls - a.calls;
  const double moved = b.ring_bytes - a.ring_bytes;
  out.traffic_ok[i] = calls == 1 && std::fabs(moved - want) <= 1e-9 * want && b.sent == a.sent;
  out.traffic[i] = str(calls, " collective call(s) moving ", moved, " ring bytes per rank (contract: 1 of ", want, ")",
                       b.sent != a.sent ? ", and point-to-point messages" : "");
}
}  // namespace

PairFindings check_sequence_pair(Communicator& group, Device& device) {
  const int t = group.rank(), tp = group.size();
  const int64_t T = 2 * tp, n = kPairBatch * T, whole = n * kPairWidth;
  std::vector<int64_t> all(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < n; ++r) all[std::size_t(r)] = r;
  const std::vector<int64_t> mine = my_rows(T, t, tp);
  auto entry = [](int64_t r, int64_t c) { return r * kPairWidth + c; };
  PairFindings out;

  // gather: my rows' entries → the whole tensor; loss Σ (t+1)·(entry+1)·y on
  // each rank, so mine's gradient is Σ_s (s+1)·(entry+1) = tp(tp+1)/2·(entry+1).
  Tensor x = made(mine, device, entry).set_requires_grad(true);
  const PairCounts c0 = pair_counts(group);
  Tensor y = gather_sequence(group, x, kPairBatch);
  const PairCounts c1 = pair_counts(group);
  out.gap[0] = gap_to(y, made(all, device, entry));
  backward(sum(mul(y, made(all, device, [&](int64_t r, int64_t c) { return (t + 1) * (entry(r, c) + 1); }))));
  const PairCounts c2 = pair_counts(group);
  out.gap[1] = gap_to(x.grad(), made(mine, device, [&](int64_t r, int64_t c) { return tp * (tp + 1) / 2 * (entry(r, c) + 1); }));
  const double half = 4.0 * double(whole) * (tp - 1) / tp;  // half an all-reduce of the whole tensor, in bytes
  judge_pass(0, c0, c1, half, out);
  judge_pass(1, c1, c2, half, out);

  // scatter: rank s's term (s+1)·entry → my rows of tp(tp+1)/2·entry; loss
  // Σ (entry+2)·z over my rows, so every rank's term gets (entry+2) on every row.
  Tensor p = made(all, device, [&](int64_t r, int64_t c) { return (t + 1) * entry(r, c); }).set_requires_grad(true);
  const PairCounts c3 = pair_counts(group);
  Tensor z = scatter_sequence(group, p, kPairBatch);
  const PairCounts c4 = pair_counts(group);
  out.gap[2] = gap_to(z, made(mine, device, [&](int64_t r, int64_t c) { return tp * (tp + 1) / 2 * entry(r, c); }));
  backward(sum(mul(z, made(mine, device, [&](int64_t r, int64_t c) { return entry(r, c) + 2; }))));
  const PairCounts c5 = pair_counts(group);
  out.gap[3] = gap_to(p.grad(), made(all, device, [&](int64_t r, int64_t c) { return entry(r, c) + 2; }));
  judge_pass(2, c3, c4, half, out);
  judge_pass(3, c4, c5, half, out);
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
  for (int i = 0; i < 4; ++i)
    v.holds(str(what[i], " (exact, integers), in one collective call moving half an all-reduce's bytes"),
            worst[i] == 0 && worst[4 + i] == 0, str("max |Δ| over the ranks ", worst[i], "; rank 0: ", mine.traffic[i]));
  return ok;
}

}  // namespace dpt::ch15
