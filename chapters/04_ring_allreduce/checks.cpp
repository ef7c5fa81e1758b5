// chapters/04_ring_allreduce/checks.cpp — chapter 04's checks (checks.h):
// each phase of your ring by its own postcondition, then the all-reduce
// against serial sums and, as its all-gather begins, where Avg divided; the
// training run's verdicts and summary rows.
#include "checks.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ch04.h"
#include "dpt/comm/watch.h"
#include "dpt/timing.h"

namespace dpt::ch04 {

namespace {

// Inputs are small integers, so the serial sum is exact in any order and
// every rank can compute it on its own, sharing no code with the ring. The
// ring runs on the rank's device, where training runs it.
// The (2r+1)·i term keeps the sums off multiples of n, where sum · fl(1/n)
// would round to sum / n and hide a second rounding.
float check_input(int rank, int64_t i) { return float((rank + 1) * 1000 + (i * (2 * rank + 1)) % 997); }

// Runs the ring with `op` on every rank's inputs; returns the largest error
// relative to max(1, |expected|) over all ranks and elements (NaN-aware).
// With Avg it also watches the ring's messages (dpt/comm/watch.h): when rank
// r's n-th send leaves, the first of its all-gather (each phase sends n−1),
// the chunk it owns must already hold what every rank ends with, and every
// other chunk still what your scatter-reduce alone leaves there (each rank
// divides its own chunk's floats only). `misplaced` counts the elements that
// did not (the worst rank's count). That message must also carry the chunk
// the rank finished: `first_sent` says, on the root, which one it carried when
// a rank's did not (empty when every rank's did, or none was watched).
double ring_error(Context& ctx, int64_t count, ReduceOp op, double* misplaced = nullptr,
                  std::string* first_sent = nullptr) {
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = check_input(ctx.rank, i);
  Tensor on_device = Tensor::from_vector({count}, data, ctx.device);
  const int n = ctx.world;
  std::vector<float> reduced;  // what the scatter-reduce alone leaves: the other chunks' reference
  if (misplaced) {
    Tensor alone = Tensor::from_vector({count}, data, ctx.device);
    ring_scatter_reduce(ctx.comm, alone.data(), count);
    reduced = alone.to_vector();
  }
  const Range own = ring_chunk(count, n, (ctx.rank + 1) % n);
  std::vector<float> at_send;  // the whole vector as the first all-gather message left
  int64_t sent_begin = own.begin, sent_count = own.size();  // and the floats it carried
  int sends = 0;
  auto watched = watch_messages(ctx.comm, [&](const Message& m) {
    if (m.dst < 0 || sends++ != n - 1) return;
    at_send = on_device.to_vector();
    // Judged only when it was sent from the vector itself (not from a copy).
    auto at = [](const float* f) { return int64_t(reinterpret_cast<std::uintptr_t>(f) / sizeof(float)); };
    const int64_t begin = at(m.send_data) - at(on_device.data());
    if (begin < 0 || begin + m.send_count > count) return;
    sent_begin = begin;
    sent_count = m.send_count;
  });
  ring_all_reduce(*watched, on_device.data(), count, op);
  data = on_device.to_vector();
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int r = 0; r < ctx.world; ++r) expected += check_input(r, i);
    // The sum is exact, so Avg's contract gives the bits: float(sum) / float(n), rounded once.
    if (op == ReduceOp::Avg) expected = double(float(expected) / float(ctx.world));
    double error = std::fabs(data[std::size_t(i)] - expected) / std::max(1.0, std::fabs(expected));
    if (!(error <= worst)) worst = error;  // a NaN stays
  }
  if (misplaced) {
    double wrong = 0;  // a rank that sent fewer than n messages was never watched: every element counts
    for (int64_t i = 0; i < count; ++i) {
      const std::size_t k = std::size_t(i);
      const float expected = i >= own.begin && i < own.end ? data[k] : reduced[k];
      wrong += k < at_send.size() && at_send[k] == expected ? 0 : 1;
    }
    *misplaced = max_over_ranks(ctx.comm, n > 1 ? wrong : 0);
  }
  if (first_sent) {
    const bool other = sent_begin != own.begin || sent_count != own.size();
    const bool any = max_over_ranks(ctx.comm, other ? 1.0 : 0.0) > 0;
    first_sent->clear();
    if (any && !other) *first_sent = "another rank's did not";
    if (other) {
      std::string which = "floats [" + std::to_string(sent_begin) + ", " + std::to_string(sent_begin + sent_count) + ")";
      for (int c = 0; c < n; ++c)
        if (ring_chunk(count, n, c).begin == sent_begin && ring_chunk(count, n, c).size() == sent_count)
          which = "chunk " + std::to_string(c);
      *first_sent = "rank " + std::to_string(ctx.rank) + "'s carried " + which + ", not chunk " +
                    std::to_string((ctx.rank + 1) % n) +
                    ", the one its scatter-reduce finished";
    }
  }
  return max_over_ranks(ctx.comm, worst);
}

// Each phase alone, on `count` floats (the same inputs), judged by its own
// postcondition in ch04.h. "" when it holds on every rank; else, on the
// rank that saw it first (every rank gets the same answer), what went wrong.
std::string scatter_reduce_failure(Context& ctx, int64_t count) {
  const int n = ctx.world;
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[std::size_t(i)] = check_input(ctx.rank, i);
  Tensor on_device = Tensor::from_vector({count}, data, ctx.device);
  ring_scatter_reduce(ctx.comm, on_device.data(), count);
  data = on_device.to_vector();
  const int owned = (ctx.rank + 1) % n;
  const Range own = ring_chunk(count, n, owned);
  double wrong = 0;
  std::string first;
  for (int64_t i = own.begin; i < own.end; ++i) {
    double expected = 0;
    for (int r = 0; r < n; ++r) expected += check_input(r, i);
    if (data[std::size_t(i)] == float(expected)) continue;
    if (wrong++ == 0)
      first = str("rank ", ctx.rank, "'s chunk ", owned, " (the one it must own) holds ", fmt(data[std::size_t(i)], 9),
                  " at element ", i, ", not the sum over ranks ", fmt(expected, 9));
  }
  return max_over_ranks(ctx.comm, wrong) > 0 ? (wrong > 0 ? first : "another rank's owned chunk is not its sum") : "";
}

std::string all_gather_failure(Context& ctx, int64_t count) {
  const int n = ctx.world;
  auto finished = [](int64_t i) { return float(7 + i % 991); };  // what each owner finished
  const Range own = ring_chunk(count, n, (ctx.rank + 1) % n);
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i)  // elsewhere a value no finished chunk holds
    data[std::size_t(i)] = i >= own.begin && i < own.end ? finished(i) : -float(ctx.rank + 1);
  Tensor on_device = Tensor::from_vector({count}, data, ctx.device);
  ring_all_gather(ctx.comm, on_device.data(), count);
  data = on_device.to_vector();
  double wrong = 0;
  std::string first;
  for (int64_t i = 0; i < count; ++i) {
    if (data[std::size_t(i)] == finished(i)) continue;
    if (wrong++ == 0)
      first = str("rank ", ctx.rank, "'s element ", i, " is ", fmt(data[std::size_t(i)], 9), ", its owner finished ",
                  fmt(finished(i), 9), data[std::size_t(i)] == -float(ctx.rank + 1) ? " (it never arrived)" : "");
  }
  return max_over_ranks(ctx.comm, wrong) > 0 ? (wrong > 0 ? first : "another rank misses a chunk") : "";
}

}  // namespace

void check_sums(Context& ctx, const Narrator& say, int64_t count, Verdicts& v) {
  if (ctx.world == 1) {  // a ring of one sends nothing: it holds whatever your ring does
    v.cannot_fail("ring phases, Sum and Avg = serial, the all-gather's first message", on_one_rank(3));
    return;
  }
  // The parts first: a broken phase is reported in its own words, not the all-reduce's.
  std::string scattered = scatter_reduce_failure(ctx, count), gathered = all_gather_failure(ctx, count);
  std::string broken = !scattered.empty() ? "ring_scatter_reduce" : !gathered.empty() ? "ring_all_gather" : "";
  double misplaced = 0;
  std::string first_sent;
  double sum_error = ring_error(ctx, count, ReduceOp::Sum),
         avg_error = ring_error(ctx, count, ReduceOp::Avg, &misplaced, &first_sent);
  if (!ctx.is_root()) return;
  v.holds("ring_scatter_reduce alone: rank r owns chunk (r+1) mod n, summed over every rank once", scattered.empty(),
          scattered);
  v.holds("ring_all_gather alone: every rank ends with every owner's finished chunk, bit for bit", gathered.empty(),
          gathered);
  say.say("largest relative error on any rank: Sum " + fmt(sum_error, 3) + ", Avg " + fmt(avg_error, 3) +
          " (inputs are integers, so the serial sum is exact; verdicts at the end)");
  if (!broken.empty()) {  // the all-reduce's numbers follow from the broken part: say so, not why Avg rounds
    v.at_most("ring Sum = serial sum, max relative error", sum_error, 0, "follows from " + broken + " above");
    v.at_most("ring Avg = serial sum / n, max relative error", avg_error, 0, "follows from " + broken + " above");
    return;
  }
  v.at_most("ring Sum = serial sum, max relative error", sum_error, 0,
            "integers below 2^24 add exactly in any order: any error is a wrong chunk or a missed contribution");
  v.at_most("ring Avg = serial sum / n, max relative error", avg_error, 0,
            "the exact sum divided by n once has one set of bits, float(sum) / float(n); inputs divided before the "
            "sum (n roundings) or the sum times fl(1/n) (two) differ from it in the last bit for some elements, "
            "except at n = 4 (or 2, 8, ...), where dividing is exact: check with --ranks 3");
  v.holds("ring all-gather: each rank's first message carries a chunk it has finished", first_sent.empty(),
          first_sent + (first_sent.empty() ? "" : " (where Avg divides is judged once this holds)"));
  if (!first_sent.empty()) return;  // the division's watch below would blame the division
  v.at_most("ring Avg, as each rank's all-gather began: floats of its own chunk not yet the mean, or of other "
            "chunks divided too (worst rank)",
            misplaced, 0,
            "watched as the first all-gather message left (ch04.h: each rank divides its share, about count/n "
            "floats): sums sent and divided by every rank afterwards, or every chunk divided, end right but show "
            "here");
}

void add_training_checks(Lecture& lec, const DataParallelRun& run, double s, double spread) {
  const Context& ctx = lec.ctx();
  const Options& o = lec.o;
  Verdicts& v = lec.verdicts;
  if (ctx.world > 1) {
    add_ring_traffic_verdicts(v, run.traffic, s, int64_t(run.losses.size()), "training");
    v.at_most("replicas identical: max |w_r - w_0|", spread, 0, "the all-gather copies the same bits everywhere");
  } else {
    v.cannot_fail("training: ring traffic, identical replicas", on_one_rank(3));
  }
  v.holds("the loss stayed finite", run.diverged_step < 0,
          run.diverged_step < 0 ? "" : "not at step " + std::to_string(run.diverged_step));
  Table& summary = lec.summary;
  summary.add_row({"ranks x batch per rank", str(ctx.world, " x ", o.batch)});
  summary.add_row({"loss: first step -> last step", fixed(run.losses.front(), 4) + " -> " + fixed(run.losses.back(), 4)});
  summary.add_row({"per rank per step, theory 2(n-1)/n*S", format_bytes(2.0 * (ctx.world - 1) / ctx.world * s)});
  summary.add_row({"ch03's host carried per step: 2(n-1)*S", format_bytes(2.0 * (ctx.world - 1) * s)});
  summary.add_row({"time (compute / averaging on rank 0)", fixed(run.seconds, 2) + " s (" + fixed(run.compute_seconds, 2) +
                                                              " / " + fixed(run.sync_seconds, 2) + " s)"});
}

}  // namespace dpt::ch04
