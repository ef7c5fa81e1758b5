// test_ch15_pair.cpp — chapter 15's sequence-parallel hole: the conjugate
// pair gather_sequence / scatter_sequence (ch15.h) over 2 and 4 rank threads.
// Every entry is a small integer that says where it belongs (row·C + c), so
// the sums are exact: the answers are indexed here, position by position,
// from the contract's words — rank t's positions are [t·T/tp, (t+1)·T/tp) of
// each sequence, rows b·T + τ of the whole tensor.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "support/findings.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch15;

namespace {
constexpr int64_t kPairTestBatch = 2, kPairTestTime = 8, kPairTestWidth = 3;  // T = 8: 4 positions on tp 2, 2 on tp 4

std::vector<int64_t> pair_test_rows(int t, int tp) {  // rank t's rows of the whole tensor, in order
  std::vector<int64_t> rows;
  const int64_t local = kPairTestTime / tp;
  for (int64_t b = 0; b < kPairTestBatch; ++b)
    for (int64_t tau = 0; tau < local; ++tau) rows.push_back(b * kPairTestTime + t * local + tau);
  return rows;
}
std::vector<int64_t> pair_test_all_rows() {
  std::vector<int64_t> rows(static_cast<std::size_t>(kPairTestBatch * kPairTestTime));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = int64_t(i);
  return rows;
}
Tensor pair_test_tensor(const std::vector<int64_t>& rows, Device& device, const std::function<double(int64_t, int64_t)>& v) {
  std::vector<float> out;
  for (int64_t r : rows)
    for (int64_t c = 0; c < kPairTestWidth; ++c) out.push_back(float(v(r, c)));
  return Tensor::from_vector({int64_t(rows.size()), kPairTestWidth}, out, device);
}
double pair_test_entry(int64_t r, int64_t c) { return double(r * kPairTestWidth + c); }
// "" when got = want exactly, else what differs.
std::string pair_test_differs(const Tensor& got, const Tensor& want) {
  if (!got.defined()) return "is missing";
  if (got.shape() != want.shape()) return "is " + shape_str(got.shape()) + ", not " + shape_str(want.shape());
  const std::vector<float> a = got.to_vector(), b = want.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return "row " + std::to_string(i / kPairTestWidth) + " holds " + std::to_string(a[i]) + " where " + std::to_string(b[i]) +
             " belongs";
  return "";
}
}  // namespace

TEST_CASE("gather_sequence: every rank gets the whole sequence in order, and a position's gradient is the sum of every rank's",
          "[ch15][hole:gather_sequence]") {
  for (int tp : {2, 4}) {
    dpt_test::Findings found;
    dpt_test::run_ranks(tp, [&](Context& ctx) {
      const int t = ctx.rank;
      const std::string who = "tp " + std::to_string(tp) + ", rank " + std::to_string(t) + ": ";
      Tensor mine = pair_test_tensor(pair_test_rows(t, tp), ctx.device, pair_test_entry).set_requires_grad(true);
      Tensor whole = gather_sequence(ctx.comm, mine, kPairTestBatch);
      const std::string y = pair_test_differs(whole, pair_test_tensor(pair_test_all_rows(), ctx.device, pair_test_entry));
      if (!y.empty()) return found.add(who + "the gathered sequence " + y);
      // Rank s's loss weighs every position by (s+1)·(entry+1): the sum over ranks is tp(tp+1)/2·(entry+1).
      backward(sum(mul(whole, pair_test_tensor(pair_test_all_rows(), ctx.device,
                                               [t](int64_t r, int64_t c) { return (t + 1) * (pair_test_entry(r, c) + 1); }))));
      const std::string g = pair_test_differs(
          mine.grad(), pair_test_tensor(pair_test_rows(t, tp), ctx.device, [tp](int64_t r, int64_t c) {
            return tp * (tp + 1) / 2 * (pair_test_entry(r, c) + 1);
          }));
      if (!g.empty()) found.add(who + "the gradient of my positions (the sum of every rank's) " + g);
    });
    found.require_none();
  }
}

TEST_CASE("scatter_sequence: rank t gets its positions of the group's sum, and every rank's partial gets every position's gradient",
          "[ch15][hole:scatter_sequence]") {
  for (int tp : {2, 4}) {
    dpt_test::Findings found;
    dpt_test::run_ranks(tp, [&](Context& ctx) {
      const int t = ctx.rank;
      const std::string who = "tp " + std::to_string(tp) + ", rank " + std::to_string(t) + ": ";
      // Rank s's term is (s+1)·entry: the sum is tp(tp+1)/2·entry.
      Tensor partial = pair_test_tensor(pair_test_all_rows(), ctx.device, [t](int64_t r, int64_t c) {
                         return (t + 1) * pair_test_entry(r, c);
                       }).set_requires_grad(true);
      Tensor mine = scatter_sequence(ctx.comm, partial, kPairTestBatch);
      const std::string y = pair_test_differs(mine, pair_test_tensor(pair_test_rows(t, tp), ctx.device, [tp](int64_t r, int64_t c) {
                                                return tp * (tp + 1) / 2 * pair_test_entry(r, c);
                                              }));
      if (!y.empty()) return found.add(who + "my positions of the sum " + y);
      // Every rank weighs its own positions by entry + 2: each partial's gradient is entry + 2 at every position.
      backward(sum(mul(mine, pair_test_tensor(pair_test_rows(t, tp), ctx.device,
                                              [](int64_t r, int64_t c) { return pair_test_entry(r, c) + 2; }))));
      const std::string g = pair_test_differs(
          partial.grad(),
          pair_test_tensor(pair_test_all_rows(), ctx.device, [](int64_t r, int64_t c) { return pair_test_entry(r, c) + 2; }));
      if (!g.empty()) found.add(who + "my partial's gradient (every position's, from the rank that holds it) " + g);
    });
    found.require_none();
  }
}

TEST_CASE("the sequence pair: one all-gather and one reduce-scatter each, of the contracts' sizes, and no other exchange",
          "[ch15][hole:gather_sequence][hole:scatter_sequence]") {
  const int tp = 2;
  const int64_t whole = kPairTestBatch * kPairTestTime * kPairTestWidth, local = whole / tp;
  dpt_test::Findings found;
  dpt_test::run_ranks(tp, [&](Context& ctx) {
    TrafficLog& log = ctx.comm.traffic();
    struct Seen { int64_t ag, ag_bytes, rs, rs_bytes, other; };
    auto seen = [&] {
      return Seen{log.collective_calls("all_gather", ctx.rank), log.collective_bytes("all_gather", ctx.rank),
                  log.collective_calls("reduce_scatter", ctx.rank), log.collective_bytes("reduce_scatter", ctx.rank),
                  log.collective_calls("all_reduce", ctx.rank) + log.collective_calls("broadcast", ctx.rank) +
                      log.bytes_sent(ctx.rank)};
    };
    auto expect = [&](const std::string& pass, const Seen& a, const Seen& b, int64_t ag_floats, int64_t rs_floats) {
      const bool ok = b.ag - a.ag == (ag_floats > 0) && b.ag_bytes - a.ag_bytes == 4 * ag_floats &&
                      b.rs - a.rs == (rs_floats > 0) && b.rs_bytes - a.rs_bytes == 4 * rs_floats && b.other == a.other;
      if (!ok)
        found.add(pass + ": " + std::to_string(b.ag - a.ag) + " all-gather(s) of " + std::to_string(b.ag_bytes - a.ag_bytes) +
                  " bytes, " + std::to_string(b.rs - a.rs) + " reduce-scatter(s) of " + std::to_string(b.rs_bytes - a.rs_bytes) +
                  " bytes" + (b.other != a.other ? ", and other traffic" : "") + "; the contract: " +
                  (ag_floats > 0 ? "one all-gather of " + std::to_string(ag_floats) : "one reduce-scatter of " + std::to_string(rs_floats)) +
                  " floats");
    };
    Tensor mine = pair_test_tensor(pair_test_rows(ctx.rank, tp), ctx.device, pair_test_entry).set_requires_grad(true);
    const Seen s0 = seen();
    Tensor whole_seq = gather_sequence(ctx.comm, mine, kPairTestBatch);
    const Seen s1 = seen();
    backward(sum(whole_seq));
    const Seen s2 = seen();
    Tensor partial = pair_test_tensor(pair_test_all_rows(), ctx.device, pair_test_entry).set_requires_grad(true);
    Tensor back = scatter_sequence(ctx.comm, partial, kPairTestBatch);
    const Seen s3 = seen();
    backward(sum(back));
    const Seen s4 = seen();
    expect("gather_sequence forward", s0, s1, local, 0);
    expect("gather_sequence backward", s1, s2, 0, whole);
    expect("scatter_sequence forward", s2, s3, 0, whole);
    expect("scatter_sequence backward", s3, s4, local, 0);
  });
  found.require_none();
}
