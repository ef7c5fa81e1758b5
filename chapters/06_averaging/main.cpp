// ch06_averaging — parameter averaging (local SGD) vs gradient averaging.
//
// What it teaches: averaging gradients every step keeps replicas identical;
// averaging parameters every H steps (local SGD) talks H times less but lets
// the replicas drift apart in between — and with an optimizer whose update is
// not linear in the gradient (Adam) it is a different algorithm even at H = 1.
// With --warmup-steps W the first W steps average gradients, then parameters
// (PyTorch's post-local SGD). The averaging is the library all-reduce (Avg):
// chapter 04 taught the ring, and the traffic log counts its payload.
//
// The tour (--compare, default) trains side by side: gradient averaging and
// parameter averaging at H = 1 for sgd, momentum and adam, then your setting
// (--average, --every, --warmup-steps, --optimizer, --average-state). It
// prints a table, writes losses and drift per step to --metrics (draw them
// with scripts/plot_ch06.py), and ends with verdicts.
//
// What it leaves out: averaging a subset of layers, hierarchical averaging,
// outer optimizers (DiLoCo), unequal shards. Theory: docs/ch06_averaging.md.
//
// Run it:
//     build/reference/bin/ch06_averaging --ranks 4 --metrics ch06.jsonl
//     python3 scripts/plot_ch06.py ch06.jsonl ch06.svg
//     build/reference/bin/ch06_averaging --ranks 4 --no-compare --every 8 --warmup-steps 50 --optimizer momentum
//     mpirun --oversubscribe -np 4 build/reference/bin/ch06_averaging --comm mpi
//
// Your holes (chapters/06_averaging/ch06.h): ch06::average_parameters and
// ch06::local_sgd_step. Exit code: 0 all verdicts ✔, 3 one ✘, 1 error.
// The tour's harness (settings, metrics, verdicts on one run) is tour.h.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "ch06.h"
#include "ch06_flags.h"
#include "checks.h"
#include "dpt/data_parallel.h"
#include "dpt/lecture.h"
#include "tour.h"

using namespace dpt;
using namespace dpt::ch06;

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates. Flags, data, the flags'
// own setting's held-out score and printing the verdicts are the harness's
// (lecture.h).

void lecture(Lecture& lec, const Ch06Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  const Dataset& data = lec.data;
  const HeldOut& held_out = lec.held_out();  // rank 0 scores every setting on it
  if (o.steps == 0) {
    lec.keep(make_replica(ctx, o));
    return;
  }

  // --------------------------------------------------------------------------
  // 1. Training the settings side by side. The H = 1 comparisons run
  // E = --equivalence-steps: beyond some tens of steps one ReLU flipped by
  // rounding parts the two runs (docs/ch06_averaging.md).
  const bool params = f.average == "params";
  const Schedule& h = f.schedule;
  const int64_t e = std::min(o.steps, f.equivalence_steps);
  auto grads_of = [&](const std::string& opt, int64_t steps) { return make_setting(o, opt, false, 1, 0, false, f.adam_lr, steps); };
  auto h1_of = [&](const std::string& opt) { return make_setting(o, opt, true, 1, 0, h.average_state, f.adam_lr, e); };
  std::vector<Setting> settings;  // the tour's, then the checks', then the flags' own setting
  if (f.compare)
    for (const char* opt : {"sgd", "momentum", "adam"}) settings.push_back(grads_of(opt, e)), settings.push_back(h1_of(opt));
  const Setting mine = make_setting(o, o.optimizer, params, h.every, h.warmup, h.average_state, f.adam_lr, o.steps);
  const Setting grads_mine = grads_of(o.optimizer, o.steps), verified = grads_of(o.optimizer, e);
  auto has = [&](const std::string& name) {
    for (const Setting& s : settings) if (s.name == name) return true;
    return false;
  };
  if (lec.verify && !has(verified.name)) settings.push_back(verified);  // one device checks it over the same horizon
  if (params && !has(grads_mine.name)) settings.push_back(grads_mine);  // the bytes to compare with
  if (!has(mine.name)) settings.push_back(mine);
  say.section(str("1. Training ", settings.size(), " settings on ", ctx.world, " ranks (", o.steps, " steps, batch ",
                  o.batch, " per rank)"));
  MLP last = make_replica(ctx, o);  // what --save-weights writes: the flags' own setting
  for (Setting& s : settings) {
    say.say("  " + s.name);
    MLP trained = run_setting(ctx, data, s);
    if (held_out.enabled() && s.written) s.test = evaluate(trained, held_out.data);
    if (s.name == mine.name) last = trained;
  }
  if (!ctx.is_root()) return;
  auto find = [&](const std::string& name) -> const Setting& {
    for (const Setting& s : settings) if (s.name == name) return s;
    return settings.back();
  };
  lec.keep(last);  // the flags' own setting: saved, and scored in the summary
  write_metrics(o.metrics, settings, find(mine.name));
  const Setting& grads_ref = find(grads_mine.name);
  const int64_t psi = last.num_parameters();

  // --------------------------------------------------------------------------
  // 2. What each setting computed and sent
  say.section("2. What each setting computed and sent");
  Table table(str("ch06: ", ctx.world, " ranks, Psi = ", psi, " parameters"),
              {"setting", "final loss", "held-out acc.", "max |w - w_grads|", "averagings", "all-reduce/rank", "max drift"});
  for (const Setting& s : settings) {
    if (!s.written) { table.add_row({s.name, "not written yet", "-", "-", "-", "-", "-"}); continue; }
    const Setting& ref = find(grads_of(s.o.optimizer, s.o.steps).name);
    table.add_row({s.name, fixed(s.run.losses.back(), 4), held_out.enabled() ? fixed(100 * s.test.accuracy, 1) + "%" : "-",
                   fmt(weight_gap(s, ref), 3),
                   std::to_string(s.run.averaged_at.size() + std::size_t(s.run.gradient_steps)),
                   format_bytes(double(s.run.traffic.collective_bytes("all_reduce", 0))), fmt(max_over(s.run.drift), 3)});
  }
  table.print(std::cout);
  lec.summary.add_row({"the flags' own setting", mine.name});
  say.say("max drift: the largest max |w_r - w_0| at the end of a step. Losses and drift per step: --metrics,\n"
          "drawn by scripts/plot_ch06.py.");
  const Setting& m = find(mine.name);
  const bool local = params && m.written && ctx.world > 1 && h.every > 1 && o.steps > h.warmup + 1;
  if (local) {
    double saved = 1 - double(m.run.traffic.collective_bytes("all_reduce", 0)) /
                           double(grads_ref.run.traffic.collective_bytes("all_reduce", 0));
    say.say(str("communication saved by ", m.name, ": ", fixed(100 * saved, 1), " % (",
                m.run.averaged_at.size() + std::size_t(m.run.gradient_steps), " averagings in ", o.steps,
                " steps; (H-1)/H = ", fixed(100.0 * double(h.every - 1) / double(h.every), 1),
                " % when W = 0 and H divides the steps)"));
  }

  // --------------------------------------------------------------------------
  // 3. Verdicts: each run against its spec, one device, the H = 1 identities (checks.cpp)
  add_tour_verdicts(lec, settings, {grads_ref, find(verified.name), local ? &m : nullptr}, f);
}

// ----------------------------------------------------------------------------
// flags, then the lecture on every rank

int main(int argc, char** argv) {
  Ch06Flags flags;
  auto add_flags = [&flags](CLI::App& app, Options&) { add_ch06_flags(app, flags); };  // ch06_flags.cpp
  Chapter chapter{"ch06_averaging", "parameter averaging (local SGD) vs gradient averaging"};
  chapter.default_ranks = 4;  // the page's first command: a bare run's verdicts can fail
  return run_chapter(argc, argv, chapter, add_flags, [&flags](Lecture& lec) { lecture(lec, flags); });
}
