// sections.cpp — chapter 13's probes, clock and memory section (sections.h).
#include "sections.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/holes.h"
#include "dpt/ops.h"

namespace dpt::ch13 {

std::vector<Op> schedule_of(const std::string& name, int stage, int stages, int micro_batches) {
  return name == "gpipe" ? gpipe(stage, stages, micro_batches) : one_f_one_b(stage, stages, micro_batches);
}

Written written_holes(Communicator& comm, int stages, int micro_batches) {
  Written w;
  Holes holes;  // each probe on this rank alone
  w.one_f_one_b = holes.run_here([&] { one_f_one_b(0, stages, micro_batches); });
  w.accumulate = holes.run_here([&] {
    std::vector<Tensor> total = {Tensor::zeros({1}, Device::host())}, micro = {Tensor::zeros({1}, Device::host())};
    accumulate_micro_batch(total, micro, 1, 1);
  });
  w.run_schedule = holes.run_here([&] { run_schedule(comm, {}, StageWork{}); });  // no op: no message
  w.missing = holes.missing_text();
  return w;
}

std::string schedules_problem(const std::vector<std::vector<Op>>& schedules, int micro_batches) {
  for (std::size_t s = 0; s < schedules.size(); ++s) {
    std::vector<int> forwards(std::size_t(micro_batches), 0), backwards(std::size_t(micro_batches), 0);
    for (const Op& op : schedules[s]) {
      if (op.micro_batch < 0 || op.micro_batch >= micro_batches)
        return str("stage ", s, " lists ", op_name(op), ": there are micro-batches 0 to ", micro_batches - 1);
      ++(op.pass == Pass::Forward ? forwards : backwards)[std::size_t(op.micro_batch)];
    }
    for (int m = 0; m < micro_batches; ++m)
      if (forwards[std::size_t(m)] != 1 || backwards[std::size_t(m)] != 1)
        return str("stage ", s, " lists F", m, " ", forwards[std::size_t(m)], " time(s) and B", m, " ",
                   backwards[std::size_t(m)], " time(s), not once each: ", schedule_text(schedules[s]));
  }
  try {
    replay_pipeline(schedules, [](int, const Op&) { return 1.0; });
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void accumulation_check(const Narrator& say, const MLP& model, const Batch& batch, Verdicts& v) {
  const int64_t B = batch.x.shape()[0];
  if (B < 3) return;
  const std::vector<int64_t> sizes = {1, B / 2 - 1 > 0 ? B / 2 - 1 : 1, B - 1 - (B / 2 - 1 > 0 ? B / 2 - 1 : 1)};
  std::vector<Tensor> params = model.parameters();
  auto gradient = [&](int64_t a, int64_t b) {  // of the mean loss of rows [a, b)
    for (Tensor& p : params) p.zero_grad();
    std::vector<int64_t> labels(batch.y.begin() + a, batch.y.begin() + b);
    backward(softmax_cross_entropy(model.forward(batch.x.rows(a, b)), labels));
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad().clone());
    return grads;
  };
  const std::vector<Tensor> whole = gradient(0, B);
  std::vector<Tensor> total;
  for (const Tensor& g : whole) total.push_back(Tensor::zeros(g.shape(), g.device()));
  for (int64_t k = 0, start = 0; k < 3; start += sizes[std::size_t(k)], ++k)
    accumulate_micro_batch(total, gradient(start, start + sizes[std::size_t(k)]), sizes[std::size_t(k)], B);
  for (Tensor& p : params) p.zero_grad();
  double gap = 0, scale = 0, largest = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    gap = std::max(gap, double(max_abs_diff(total[i], whole[i])));
    Tensor zero = Tensor::zeros(whole[i].shape(), whole[i].device());
    scale = std::max(scale, double(max_abs_diff(whole[i], zero)));
    largest = std::max(largest, double(max_abs_diff(total[i], zero)));
  }
  const std::string zero_note = largest == 0 ? ": it is zero everywhere. Is a weight 0, e.g. an integer division?" : "";
  say.say(str("micro-batches of ", sizes[0], ", ", sizes[1], " and ", sizes[2], " samples: your sum of their gradients is ",
              fmt(gap / scale, 3), " (relative) from the gradient of the batch of ", B, zero_note));
  v.at_most(str("accumulated gradient of micro-batches of ", sizes[0], " + ", sizes[1], " + ", sizes[2],
                " = the batch's gradient (relative gap)"), gap / scale, 1e-5,
            largest == 0 ? "your accumulated gradient is zero everywhere: is a weight 0, e.g. an integer division?"
                         : "each sample counts once and equally, whatever its micro-batch's size (float sums in another order: ~1e-7)");
}

// ----------------------------------------------------------------------------
// one probe step, gathered to stage 0

ProbedStep probe_step(Communicator& comm, PipelineStage& stage, const Batch& batch, int micro_batches,
                      const std::string& schedule) {
  const int stages = comm.size(), capacity = 4 * micro_batches;  // room for twice the ops a stage should run
  ProbedStep probe{schedule, {}, {}, {}};
  for (int s = 0; s < stages; ++s) probe.asked.push_back(schedule_of(schedule, s, stages, micro_batches));
  // The probe's sends under a step of their own: one per schedule, apart from training's steps.
  const int64_t before = comm.traffic().step(), probe_step_id = 1000000 + 2 * before + (schedule == "gpipe" ? 0 : 1);
  comm.traffic().set_step(probe_step_id);
  StageStep mine = pipeline_step(comm, stage, batch, micro_batches, probe.asked[std::size_t(comm.rank())]);
  comm.traffic().set_step(before);
  TrafficLog log = comm.gather_traffic();
  probe.bytes.assign(std::size_t(stages), std::vector<int64_t>(std::size_t(stages), 0));
  for (int a = 0; a < stages; ++a)
    for (int b = 0; b < stages; ++b) probe.bytes[std::size_t(a)][std::size_t(b)] = log.bytes(a, b, probe_step_id);
  for (Tensor& p : stage.parameters()) p.zero_grad();  // a probe: nothing is applied
  // Every stage's probe, gathered: a summary, then up to `capacity` ops with their times.
  struct Summary {
    int ran, peak_in_flight;
    double micro_batch_bytes, peak_activation_bytes;
  };
  struct TimedOp {
    Op op;
    double seconds;
  };
  const int ran = std::min<int>(int(mine.ran.size()), capacity);
  const std::vector<Summary> summaries =
      comm.all_gather(Summary{ran, mine.peak_in_flight, mine.micro_batch_bytes, mine.peak_activation_bytes});
  std::vector<TimedOp> timed(static_cast<std::size_t>(capacity));
  std::vector<TimedOp> all(timed.size() * static_cast<std::size_t>(stages));
  for (int i = 0; i < ran; ++i) timed[std::size_t(i)] = {mine.ran[std::size_t(i)], mine.seconds[std::size_t(i)]};
  comm.all_gather(timed.data(), all.data(), capacity);
  if (comm.rank() != 0) return probe;
  for (int s = 0; s < stages; ++s) {
    const Summary& got = summaries[std::size_t(s)];
    StageStep st;
    st.peak_in_flight = got.peak_in_flight, st.micro_batch_bytes = got.micro_batch_bytes;
    st.peak_activation_bytes = got.peak_activation_bytes;
    for (int i = 0; i < got.ran; ++i) {
      const TimedOp& t = all[std::size_t(s) * std::size_t(capacity) + std::size_t(i)];
      st.ran.push_back(t.op);
      st.seconds.push_back(t.seconds);
    }
    probe.stages.push_back(st);
  }
  return probe;
}

// ----------------------------------------------------------------------------
// the clock, the bubble, the memory

namespace {
// In-flight micro-batches the schedule's formula allows stage s.
int in_flight_formula(const std::string& schedule, int stage, int stages, int micro_batches) {
  return schedule == "gpipe" ? micro_batches : std::min(stages - stage, micro_batches);
}

// Most micro-batches forwarded and not yet backwarded, read off the op list alone (no run).
int listed_peak(const std::vector<Op>& ops) {
  int now = 0, most = 0;
  for (const Op& op : ops) most = std::max(most, now += op.pass == Pass::Forward ? 1 : -1);
  return most;
}
}  // namespace

void micro_batch_sweep(const Narrator& say, int stages, bool with_1f1b, Verdicts& v) {
  Table table(str("the clock alone, P = ", stages, " equal stages, backward = 2 x forward"),
              {"M", "bubble gpipe", "bubble 1f1b", "(P-1)/(M+P-1)", "stage 0 holds: gpipe", "1f1b"});
  double worst = 0;
  std::string over;  // the first stage whose 1F1B list holds more than min(P - s, M): no run_schedule needed to see it
  for (int M = 1; M <= 32; M *= 2) {
    std::vector<std::string> row = {std::to_string(M)};
    std::vector<int> held;
    for (const std::string name : {"gpipe", "1f1b"}) {
      if (name == "1f1b" && !with_1f1b) { row.push_back("-"), held.push_back(-1); continue; }
      std::vector<std::vector<Op>> all;
      for (int s = 0; s < stages; ++s) all.push_back(schedule_of(name, s, stages, M));
      const std::string problem = schedules_problem(all, M);
      if (!problem.empty()) {  // your 1F1B at another M
        v.holds(str(name, " at M = ", M, ": the stages' schedules can run to the end"), false, problem);
        row.push_back("cannot run"), held.push_back(-1);
        continue;
      }
      Timeline t = replay_pipeline(all, [](int, const Op& op) { return op.pass == Pass::Forward ? 1.0 : 2.0; });
      worst = std::max(worst, std::fabs(bubble_fraction(t) - bubble_formula(stages, M)));
      row.push_back(fixed(100 * bubble_fraction(t), 1) + " %");
      held.push_back(listed_peak(all[0]));
      if (name == "1f1b")
        for (int s = 0; s < stages && over.empty(); ++s)
          if (listed_peak(all[std::size_t(s)]) > in_flight_formula(name, s, stages, M))
            over = str("at M = ", M, " stage ", s, " lists ", schedule_text(all[std::size_t(s)]), ": it holds ",
                       listed_peak(all[std::size_t(s)]), " micro-batches at once, above min(P - s, M) = ",
                       in_flight_formula(name, s, stages, M));
    }
    row.push_back(fixed(100 * bubble_formula(stages, M), 1) + " %");
    for (std::size_t i = 0; i < held.size(); ++i) {
      const bool bounded = i == 1 && held[i] > in_flight_formula("1f1b", 0, stages, M);  // 1F1B: at most min(P, M) on stage 0
      row.push_back(held[i] < 0 ? "-" : bounded ? str(held[i], " ✘ (<= ", std::min(stages, M), ")") : std::to_string(held[i]));
    }
    table.add_row(row);
  }
  if (say.enabled()) table.print(std::cout);
  v.at_most("bubble by the clock = (P-1)/(M+P-1) for M = 1 ... 32, largest gap", worst, 1e-9,
            "more micro-batches shrink the bubble; GPipe pays in activations held, 1F1B does not");
  if (with_1f1b)
    v.holds("1f1b, from the schedules alone: stage s lists at most min(P - s, M) micro-batches in flight, M = 1 ... 32",
            over.empty(), over);
}

void clock_and_memory(const Narrator& say, const Ch13Flags& f, const std::vector<ProbedStep>& probes,
                      const std::vector<int64_t>& boundary_floats, int64_t batch, Verdicts& v) {
  const int P = f.stages, M = f.micro_batches;
  const bool set = f.stage_ms > 0, equal = set && f.slow_stage < 0;
  // The clock's duration of one op: --stage-ms (backward twice forward) or the measured time; the slow stage x2.
  auto seconds_for = [&](const StageStep& st, std::size_t i, int s) {
    const bool fwd = st.ran[i].pass == Pass::Forward;
    const double base = set ? f.stage_ms * 1e-3 * (fwd ? 1 : 2) : st.seconds[i];
    return s == f.slow_stage ? 2 * base : base;
  };
  std::vector<std::pair<std::string, Timeline>> drawn;
  std::vector<std::vector<int>> bounds;  // per drawn timeline, per stage: the in-flight bound its schedule promises
  Table table(str("one step, P = ", P, " stages, M = ", M, " micro-batches (clock: ",
                  set ? str(fixed(f.stage_ms, 2), " ms forward, ", fixed(2 * f.stage_ms, 2), " ms backward") : "measured", ")"),
              {"schedule", "stage", "busy ms", "idle ms", "in flight (formula)", "activation peak", "= micro-batches"});
  for (const ProbedStep& probe : probes) {
    std::vector<std::vector<Op>> ran;
    bool in_order = true;
    for (int s = 0; s < P; ++s) {
      ran.push_back(probe.stages[std::size_t(s)].ran);
      in_order = in_order && ran.back() == probe.asked[std::size_t(s)];
    }
    v.holds(probe.name + ": every stage ran its schedule's ops, in order, once each", in_order,
            in_order ? "" : "stage 0 ran: " + schedule_text(ran[0]));
    Timeline t = replay_pipeline(ran, [&](int s, const Op& op) {
      const StageStep& st = probe.stages[std::size_t(s)];
      for (std::size_t i = 0; i < st.ran.size(); ++i)
        if (st.ran[i] == op) return seconds_for(st, i, s);
      return 0.0;
    });
    drawn.push_back({probe.name, t});
    bounds.emplace_back();
    for (int s = 0; s < P; ++s) bounds.back().push_back(in_flight_formula(probe.name, s, P, M));
    const double bubble = bubble_fraction(t), formula = bubble_formula(P, M), span = makespan(t);
    say.say(str(probe.name, ": the step takes ", fixed(span * 1e3, 2), " ms on the clock; bubble ", fixed(100 * bubble, 2),
                " % of P x that (formula (P-1)/(M+P-1) = ", fixed(100 * formula, 2), " %)"));
    if (equal)
      v.near(probe.name + ": bubble fraction by the clock = (P-1)/(M+P-1)", bubble, formula, 1e-9,
             "equal stages; the clock adds exact op times, so only double rounding separates them");
    if (set && f.slow_stage >= 0) {
      // Unequal stages: GPipe's step is one micro-batch through every stage plus M-1 more at the slowest's pace;
      // any schedule takes at least the slow stage's own work plus the other stages' F and B of one micro-batch before it.
      const double fb = 3 * f.stage_ms * 1e-3, slow = 2 * fb;
      const double gpipe_time = (P - 1) * fb + slow + (M - 1) * slow, path = f.slow_stage * fb + M * slow;
      if (probe.name == "gpipe")
        v.near("gpipe: step time by the clock = sum over stages of (f+b) + (M-1) x the slowest stage's (ms)", span * 1e3,
               gpipe_time * 1e3, 1e-6, "the slow stage sets the pace of every micro-batch after the first");
      else
        v.at_least(probe.name + ": step time by the clock >= the slow stage's M x (f+b) + (f+b) of the stages before it (ms)",
                   span * 1e3, path * 1e3, "the slow stage works M x (f+b) and waits for micro-batch 0 from upstream");
      v.holds(str(probe.name, ": the clock's busiest stage is stage ", slowest_stage(t), ", the one --slow-stage slowed"),
              slowest_stage(t) == f.slow_stage,
              str("stage ", slowest_stage(t), " busy ", fixed(busy_seconds(t, slowest_stage(t)) * 1e3, 2), " ms of ",
                  fixed(span * 1e3, 2), "; bubble ", fixed(100 * bubble, 1), " % against ", fixed(100 * formula, 1),
                  " % for equal stages"));
    }
    if (!set)
      say.say(str("  measured stages are not equal: the busiest, stage ", slowest_stage(t), " (",
                  fixed(busy_seconds(t, slowest_stage(t)) * 1e3, 2), " ms busy), sets the pace"));
    bool wire_ok = true;  // B x width x 4 bytes each way across each boundary, nothing between other pairs
    std::string wire;
    for (int a = 0; a < P; ++a)
      for (int b = 0; b < P; ++b) {
        const int64_t got = probe.bytes[std::size_t(a)][std::size_t(b)];
        const int64_t want = std::abs(a - b) == 1 ? batch * boundary_floats[std::size_t(std::min(a, b))] * 4 : 0;
        if (got != want && wire_ok) wire = str("stage ", a, " sent stage ", b, " ", got, " bytes, not ", want);
        wire_ok = wire_ok && got == want;
      }
    v.holds(probe.name + ": stages send only to their neighbours: B x width x 4 bytes of activations up, as many of gradients down",
            wire_ok, wire_ok ? str(format_bytes(double(probe.bytes[0][std::min(1, P - 1)])), " across the first boundary") : wire);
    bool memory_ok = true, bytes_ok = true;
    std::string seen;
    for (int s = 0; s < P; ++s) {
      const StageStep& st = probe.stages[std::size_t(s)];
      const int want = in_flight_formula(probe.name, s, P, M);
      const double ratio = st.micro_batch_bytes > 0 ? st.peak_activation_bytes / st.micro_batch_bytes : 0;
      // GPipe holds exactly M; 1F1B's contract is a bound (its bubble verdict says it did not hold too few)
      memory_ok = memory_ok && (probe.name == "gpipe" ? st.peak_in_flight == want : st.peak_in_flight <= want);
      bytes_ok = bytes_ok && std::fabs(ratio - st.peak_in_flight) <= 1e-3;
      seen += str(s ? ", " : "", st.peak_in_flight);
      table.add_row({probe.name, std::to_string(s), fixed(busy_seconds(t, s) * 1e3, 2),
                     fixed((span - busy_seconds(t, s)) * 1e3, 2), str(st.peak_in_flight, " (", want, ")"),
                     format_bytes(st.peak_activation_bytes), fixed(ratio, 2) + " x " + format_bytes(st.micro_batch_bytes)});
    }
    const std::string law = probe.name == "gpipe" ? "= M" : "<= min(P - s, M)";
    v.holds(probe.name + ": peak micro-batches in flight on stage s " + law + " (stages 0..P-1: " + seen + ")", memory_ok,
            memory_ok ? "" : "the schedule holds more activations than 1F1B's bound");
    v.holds(probe.name + ": peak activation bytes per stage = micro-batches in flight x one micro-batch's", bytes_ok,
            "measured on each stage's device, activations held from F m to B m");
  }
  if (say.enabled()) table.print(std::cout);
  if (!f.gantt.empty()) {
    write_gantt_svg(f.gantt, str("pipeline, P = ", P, ", M = ", M, ": forward and backward per stage and micro-batch"), drawn, bounds);
    say.say("Gantt chart: " + f.gantt);
  } else {
    say.say("add --gantt FILE.svg for the Gantt chart of these steps, --gantt-trace FILE.json for ui.perfetto.dev");
  }
  if (!f.gantt_trace.empty()) {
    write_gantt_trace(f.gantt_trace, drawn);
    say.say("the clock's timeline as a Chrome trace: " + f.gantt_trace);
  }
}

}  // namespace dpt::ch13
