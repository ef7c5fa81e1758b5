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

TEST_CASE("the sequence pair: one collective call per pass, moving half an all-reduce's bytes, and no other exchange",
          "[ch15][hole:gather_sequence][hole:scatter_sequence]") {
  for (int tp : {2, 4}) {
    const int64_t whole = kPairTestBatch * kPairTestTime * kPairTestWidth;
    const double half = 4.0 * double(whole) * (tp - 1) / tp;  // ring bytes per rank of half an all-reduce of the whole
    dpt_test::Findings found;
    dpt_test::run_ranks(tp, [&](Context& ctx) {
      TrafficLog& log = ctx.comm.traffic();
      // Bytes per rank on a ring, from each collective's payload as the log counts it (chapter 04's counts).
      struct Seen { int64_t calls, sent; double ring; };
      auto seen = [&] {
        const double share = double(tp - 1) / tp;
        Seen s{0, log.bytes_sent(ctx.rank), 0};
        for (const auto& [name, per_byte] : {std::pair<const char*, double>{"all_gather", double(tp - 1)},
                                             {"reduce_scatter", share}, {"all_reduce", 2 * share}, {"broadcast", 1.0}}) {
          s.calls += log.collective_calls(name, ctx.rank);
          s.ring += per_byte * double(log.collective_bytes(name, ctx.rank));
        }
        return s;
      };
      auto expect = [&](const std::string& pass, const Seen& a, const Seen& b) {
        const bool ok = b.calls - a.calls == 1 && std::fabs((b.ring - a.ring) - half) <= 1e-9 * half && b.sent == a.sent;
        if (!ok)
          found.add("tp " + std::to_string(tp) + ", " + pass + ": " + std::to_string(b.calls - a.calls) +
                    " collective call(s) moving " + std::to_string(b.ring - a.ring) + " ring bytes per rank" +
                    (b.sent != a.sent ? ", and point-to-point messages" : "") + "; the contract: one call moving " +
                    std::to_string(half) + " (half an all-reduce of the whole tensor)");
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
      expect("gather_sequence forward", s0, s1);
      expect("gather_sequence backward", s1, s2);
      expect("scatter_sequence forward", s2, s3);
      expect("scatter_sequence backward", s3, s4);
    });
    found.require_none();
  }
}
