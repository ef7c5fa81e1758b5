// checks.cpp — chapter 10's verdicts (checks.h), beside the lecture so that
// main.cpp reads as the lesson. Every expected value comes from a formula,
// a law or a serial oracle, never from the quantity judged.
#include "checks.h"

#include "bytes_and_plot.h"

namespace dpt::ch10 {

void compression_verdicts(Verdicts& v, const std::vector<CompressedRun>& runs, const std::vector<Shape>& shapes,
                          int world, const HoleProbe& decode, const HoleProbe& full_rank) {
  std::string unwritten, diverged;
  for (const CompressedRun& r : runs) {
    const std::string name = r.setting.name();
    if (!r.written) { unwritten += (unwritten.empty() ? "" : ", ") + name; continue; }
    if (r.run.diverged_step >= 0) diverged += (diverged.empty() ? "" : ", ") + name;
    v.near(name + ": payload bytes per rank per step (traffic log) = the formula", measured_payload(r.run.traffic, 0, r.steps),
           payload_formula(r.setting.compress, shapes, world), 0, "every message goes through the communicator");
    if (!r.setting.error_feedback) continue;
    if (r.run.diverged_step >= 0) {  // inf/nan weights: a gap or a spread of them would read as a wrong answer
      v.holds(name + ": sum delivered + residual = sum of gradients; every rank applied the same updates", false,
              "not measurable: the run produced non-finite values (inf/nan) at step " + std::to_string(r.run.diverged_step) +
                  " — look for the first failing verdict or test of the holes it calls");
      continue;
    }
    v.at_most(name + ": on each rank, sum delivered + residual = sum of its gradients, max |gap|", r.invariant_gap,
              r.invariant_bound, "what a message leaves out is sent later, never lost");
    const std::string same = name + ": every rank applied the same updates, max |w_r - w_0|";
    if (world == 1) v.cannot_fail(same, on_one_rank(4));
    else v.at_most(same, r.replica_spread, 0, "the update is the compressor's mean, the same bits everywhere");
  }
  v.holds("every setting ran (holes written)", unwritten.empty(), unwritten.empty() ? "" : "not yet: " + unwritten);
  v.holds("every loss stayed finite", diverged.empty(), diverged.empty() ? "" : "not in " + diverged);
  const std::string topk = "top-k: decoded mean = the serial mean of every rank's top-k (random vectors, shared indices), max |diff| / max";
  const std::string powersgd = "PowerSGD at full rank = the uncompressed mean, max |approx - M| / max |M|";
  const std::string factors = "PowerSGD's factors: approx = P q^T with P^T P = I, so approx^T approx = q q^T (along 8 "
                              "random directions), max |diff| / max";
  // A probe that met a hole not written yet measured nothing: say so (dpt/holes.h's words), never a NaN.
  const auto not_written = [&v](const std::string& what, const HoleProbe& p) {
    if (!p.hole.empty()) v.holds(what, false, "not yet: " + p.hole);
    return !p.hole.empty();
  };
  if (!not_written(factors, full_rank))  // on one rank too: approx and q come from this rank alone
    v.at_most(factors, full_rank.factors, kFactorTolerance,
              "q is the factor approx is made of, as the next round starts from it (a non-finite value: approx or "
              "q has the wrong shape)");
  // On one rank: one rank's pairs share no index, and its P needs no agreement.
  if (not_written(topk, decode)) {
  } else if (world == 1) {
    v.cannot_fail(topk, on_one_rank(4));
  } else {
    v.at_most(topk, decode.error, kDecodeTolerance,
              "every rank's pairs count, at their indices, once: the mean of the dense vectors they stand for");
  }
  if (not_written(powersgd, full_rank)) {
  } else if (world == 1) {
    v.cannot_fail(powersgd, on_one_rank(4));
  } else {
    v.at_most(powersgd, full_rank.error, kFullRankTolerance,
              "at full rank the approximation loses nothing of the ranks' mean");
  }
}

void feedback_summary(Table& summary, const std::vector<CompressedRun>& runs) {
  for (const CompressedRun& with : runs)
    for (const CompressedRun& without : runs)
      if (with.setting.error_feedback && !without.setting.error_feedback && with.setting.compress == without.setting.compress &&
          with.written && without.written)
        summary.add_row({"held-out acc. " + with.setting.compress + ": without -> with error feedback",
                         fixed(100 * without.test.accuracy, 1) + "% -> " + fixed(100 * with.test.accuracy, 1) + "%"});
}

void diloco_law_verdicts(Verdicts& v, const DilocoLaws& laws, const std::string& optimizer, int world) {
  v.holds("diloco's outer step ran (hole written)", laws.written);
  if (!laws.written) return;
  v.at_most("diloco: the outer step = SGD with Nesterov momentum on the round, taken as one step of one model; "
            "3 steps on known inputs, max |diff| / max", laws.outer, 1e-5,
            "against the core's SGD fed the same pseudo-gradients: float rounding of a few operations per entry");
  const std::string law = "H=1, outer lr 1, momentum 0, inner " + optimizer;
  const bool linear = optimizer == "sgd" || optimizer == "momentum";
  if (linear) {  // on one rank too: the mean of one is itself, and the step must land on it
    v.at_most(law + " = data parallel: max |w - w_dp| over " + std::to_string(laws.steps) + " steps", laws.gap,
              kSingleDeviceTolerance, "the mean of the ranks' steps is the step on the mean gradient when the step is linear in g");
  } else if (world == 1) {
    v.cannot_fail(law + " differs from data parallel", on_one_rank(4));
  } else {
    v.at_least(law + " differs from data parallel: max |w - w_dp|", laws.gap, 10 * kSingleDeviceTolerance,
               "m/sqrt(v) is not linear in g: the mean of steps is not the step of the mean");
  }
}

double allreduce_bytes(const TrafficLog& traffic, int64_t steps) {
  return double(traffic.collective_bytes("all_reduce", 0) - 4 * steps);
}

void diloco_run_verdicts(Verdicts& v, const DilocoRun& run, const Diloco& d, int64_t psi, int64_t steps, int world) {
  v.holds("diloco ran (hole written)", run.written);
  if (!run.written) return;
  v.near("diloco: all-reduce bytes per rank = 4 Psi per outer step (traffic log, the loss's 4 B/step aside)",
         allreduce_bytes(run.run.traffic, steps), 4.0 * double(psi) * double(steps / d.inner_steps), 0,
         std::to_string(steps / d.inner_steps) + " outer steps, none between them");
  const std::string same = "diloco: replicas identical after the last outer step, max |w_r - w_0|";
  if (world == 1) v.cannot_fail(same, on_one_rank(4));
  else v.at_most(same, run.replica_spread, 0, "every rank makes the same outer step from the same round");
}

}  // namespace dpt::ch10
