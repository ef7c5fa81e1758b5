// schedule_verdicts.cpp — chapter 05's verdicts on the buckets' schedule
// (schedule_verdicts.h).
#include "schedule_verdicts.h"

#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch05 {

// Counts over every step of every rank (the record is the engine's, not the holes').
void add_schedule_verdicts(Context& ctx, const std::vector<Bucket>& layout, const std::vector<BucketStep>& steps,
                           bool overlap, Verdicts& v) {
  // max_over_ranks clamps at 0, so every count here is "how many went wrong".
  double out_of_order = 0, unready = 0, held_back = 0, early_steps = 0;
  for (const BucketStep& s : steps) {
    out_of_order += s.in_order ? 0 : 1;
    unready += s.launched_unready;
    held_back += s.held_back;
    early_steps += s.launched_early > 0 ? 1 : 0;
  }
  out_of_order = max_over_ranks(ctx.comm, out_of_order);
  unready = max_over_ranks(ctx.comm, unready);
  held_back = max_over_ranks(ctx.comm, held_back);
  early_steps = max_over_ranks(ctx.comm, early_steps);
  if (!ctx.is_root()) return;
  std::vector<int> filled;  // the layout's parameters, bucket after bucket
  for (const Bucket& b : layout) filled.insert(filled.end(), b.params.begin(), b.params.end());
  bool reverse = true;
  for (std::size_t i = 0; i < filled.size(); ++i) reverse = reverse && filled[i] == int(filled.size() - 1 - i);
  v.holds("buckets hold every parameter once, in reverse parameters() order", reverse,
          reverse ? "the order backward finishes them" : "then the first bucket waits for the whole backward");
  v.at_most("steps whose buckets did not launch in the order every rank shares (worst rank)", out_of_order, 0,
            "ranks pair their collectives by issue order: every rank must issue the same buckets in the same order, "
            "whatever order its own hooks fire in");
  v.at_most("buckets launched before their last gradient was ready (worst rank)", unready, 0,
            "the all-reduce would send a gradient backward has not finished");
  if (overlap)
    v.at_most("hooks after which a bucket that could have launched still waited (worst rank)", held_back, 0,
              "as early as the contract allows: a bucket held back hides less of backward; in " +
                  fixed(early_steps, 0) + " steps one left before backward's last gradient");
  else
    v.at_most("--no-overlap: steps with a bucket launched before backward's last gradient", early_steps, 0,
              "without overlap every bucket waits for the whole backward");
}

}  // namespace dpt::ch05
