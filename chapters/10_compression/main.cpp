// ch10_compression — fewer bytes on the wire: compressed gradients, and error
// feedback that makes them add up.
//
// What it teaches: a compressor sends fewer bytes than the Ψ floats of an
// all-reduce — 16-bit casts half, top-k a few (index, value) pairs, scaled
// sign one bit per entry, PowerSGD two thin matrices per layer — but what it
// drops is lost, step after step, and the update is biased. Error feedback
// keeps on each rank what its message left out and sends it with the next
// step's gradient: the sum of applied updates plus what is still held equals
// the sum of true mean gradients, to float rounding. The traffic log counts
// every byte, against each compressor's formula.
//
// The tour (--compare, default) trains every compressor side by side at equal
// steps, without and with error feedback, then your setting (--compress,
// --error-feedback). It prints bytes, held-out accuracy and the invariant,
// checks PowerSGD at full rank against the uncompressed mean, draws held-out
// accuracy against bytes (--plot), and ends with verdicts.
//
// DiLoCo sends as much per message but H times fewer messages: each rank
// takes H inner steps alone, then an outer optimizer (Nesterov SGD) takes
// the whole round as one step of one model. The tour ends with its laws (a short
// section); --mode diloco trains it against data parallelism.
//
// What it leaves out: compressing on a GPU, bucketed or overlapped
// compression, majority-vote signSGD, compressing DiLoCo's pseudo-gradient.
// Theory: docs/ch10_compression.md.
//
// Run it:
//     build/reference/bin/ch10_compression --plot ch10.svg          # 4 rank threads
//     build/reference/bin/ch10_compression --ranks 4 --no-compare --compress topk:500 --error-feedback
//     build/reference/bin/ch10_compression --ranks 4 --mode diloco --inner-steps 10 --optimizer adamw --lr 0.001
//     mpirun --oversubscribe -np 4 build/reference/bin/ch10_compression --comm mpi
//
// Your holes (chapters/10_compression/ch10.h): ch10::error_feedback_step,
// ch10::topk_reconstruct, ch10::powersgd_round, ch10::diloco_outer_step. Exit code: 0 all verdicts ✔,
// 3 one ✘, 1 error, 2 a bad flag. Flags: options.h; verdicts: checks.cpp.
#include <iostream>

#include "break_even.h"
#include "bytes_and_plot.h"
#include "ch10.h"
#include "checks.h"
#include "compressed_training.h"
#include "diloco.h"
#include "diloco_check.h"
#include "dpt/lecture.h"
#include "options.h"

using namespace dpt;
using namespace dpt::ch10;

// ----------------------------------------------------------------------------
// DiLoCo's laws: one inner step, outer lr 1, no momentum = the mean of the
// ranks' steps, equal to data parallelism when the inner step is linear in
// g; and the outer step on known inputs

DilocoLaws diloco_laws(Lecture& lec, const Ch10Flags& f) {
  Context& ctx = lec.ctx();
  Options e = lec.o;
  e.steps = std::min(lec.o.steps, f.equivalence_steps);
  MLP law_dp = make_replica(ctx, e), law = make_replica(ctx, e);
  train_data_parallel(ctx, e, lec.data, law_dp, average_gradients,  // chapters 04-09's sync: the baseline
                      "data parallel, " + std::to_string(e.steps) + " steps");
  DilocoRun run = train_diloco(ctx, e, lec.data, law, Diloco{1, 1.0f, 0.0f});
  DilocoLaws laws;
  laws.outer = diloco_outer_error(ctx.comm, f.diloco, lec.o.seed + 13);  // the hole on known inputs
  laws.written = run.written, laws.steps = e.steps, laws.gap = max_weight_difference(law, law_dp);
  return laws;
}

// ----------------------------------------------------------------------------
// --mode diloco: H inner steps, one outer step, against data parallelism

void diloco_lecture(Lecture& lec, const Ch10Flags& f, MLP& kept) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Diloco& d = f.diloco;
  lec.say.section("1. DiLoCo: " + std::to_string(d.inner_steps) + " inner " + o.optimizer + " steps per rank, then " +
                  "one outer Nesterov step (lr " + fmt(d.outer_lr, 3) + ", momentum " + fmt(d.outer_momentum, 3) + ")");
  MLP dp = make_replica(ctx, o);
  DataParallelRun base = train_data_parallel(ctx, o, lec.data, dp, average_gradients, "data parallel", strided_shard,
                                             lec.verify ? &lec.recorder : nullptr);
  DilocoRun run = train_diloco(ctx, o, lec.data, kept, d);
  lec.say.section("2. DiLoCo's laws (H=1, outer lr 1, momentum 0, " + std::to_string(f.equivalence_steps) + " steps)");
  const DilocoLaws laws = diloco_laws(lec, f);
  if (!ctx.is_root()) return;
  const HeldOut& held_out = lec.held_out();
  const int64_t steps = int64_t(base.losses.size());
  auto calls = [&](const TrafficLog& t) { return t.collective_calls("all_reduce", 0) - steps; };  // less the loss's
  auto score = [&](const MLP& m) { return held_out.enabled() ? fixed(100 * evaluate(m, held_out.data).accuracy, 1) + "%" : "-"; };
  Table table("ch10 diloco: " + std::to_string(ctx.world) + " ranks, " + std::to_string(o.steps) + " steps",
              {"setting", "final loss", "held-out acc.", "all-reduces/rank", "bytes/rank"});
  table.add_row({"data parallel", fixed(base.losses.back(), 4), score(dp), std::to_string(calls(base.traffic)),
                 format_bytes(allreduce_bytes(base.traffic, steps))});
  if (run.written)
    table.add_row({"diloco H=" + std::to_string(d.inner_steps), fixed(run.run.losses.back(), 4), score(kept),
                   std::to_string(calls(run.run.traffic)), format_bytes(allreduce_bytes(run.run.traffic, steps))});
  table.print(std::cout);
  diloco_run_verdicts(lec.verdicts, run, d, kept.num_parameters(), o.steps, ctx.world);
  diloco_law_verdicts(lec.verdicts, laws, o.optimizer, ctx.world);
}

// ----------------------------------------------------------------------------
// the lecture, run by every rank; rank 0 narrates

void lecture(Lecture& lec, const Ch10Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  MLP kept = make_replica(ctx, o);
  lec.keep(kept);
  const std::vector<Shape> shapes = parameter_shapes(kept);
  const int64_t psi = kept.num_parameters();
  if (o.steps == 0) return;
  if (f.mode == "diloco") return diloco_lecture(lec, f, kept);

  // --------------------------------------------------------------------------
  // 1. What each compressor sends: the formulas, before any training
  std::vector<Setting> settings;
  auto add = [&](const Setting& s) {
    for (const Setting& t : settings) if (t.name() == s.name()) return;
    settings.push_back(s);
  };
  add({"none", false});
  const std::string topk = "topk:" + std::to_string(std::max<int64_t>(1, psi / 100)),
                    powersgd = "powersgd:" + std::to_string(f.tour_rank);
  if (f.compare) {  // error feedback on a 16-bit cast carries only its rounding: left to --error-feedback
    for (const std::string& spec : {std::string("fp16"), std::string("bf16"), topk, std::string("sign"), powersgd}) add({spec, false});
    for (const std::string& spec : {topk, std::string("sign"), powersgd}) add({spec, true});
  }
  add(f.mine);
  say.section("1. What each compressor sends, per rank per step (Psi = " + std::to_string(psi) + " parameters, " +
              std::to_string(ctx.world) + " ranks)");
  Table formulas("ch10: bytes per step by formula", {"compressor", "payload/rank", "wire/rank (rings)", "vs none"});
  const double plain = wire_formula("none", shapes, ctx.world);
  for (const Setting& s : settings)
    if (!s.error_feedback) {
      const double wire = wire_formula(s.compress, shapes, ctx.world);
      formulas.add_row({s.compress, format_bytes(payload_formula(s.compress, shapes, ctx.world)), format_bytes(wire),
                        wire > 0 ? fixed(plain / wire, 1) + "x fewer" : "-"});
    }
  if (ctx.is_root() && !o.quiet) formulas.print(std::cout);
  say.say("fp16/bf16 ring messages of 16-bit pairs; topk all-gathers K (index, value) pairs; sign all-gathers\n"
          "a bit per entry and one scale per tensor; powersgd all-reduces P (rows x R) and Q (cols x R) per matrix.\n"
          "An all-gather is not a ring of sums: each rank's message reaches every other rank, (n-1)x its payload.");

  // --------------------------------------------------------------------------
  // 2. Training every setting at equal steps
  say.section("2. Training " + std::to_string(settings.size()) + " settings (" + std::to_string(o.steps) +
              " steps, batch " + std::to_string(o.batch) + " per rank, " + o.optimizer + ")");
  std::vector<CompressedRun> runs;
  const HeldOut& held_out = lec.held_out();
  for (const Setting& s : settings) {
    say.say("  " + s.name());
    MLP replica = s.name() == f.mine.name() ? kept : make_replica(ctx, o);
    const bool oracle = s.compress == "none" && !s.error_feedback;  // only it takes one device's steps
    runs.push_back(train_compressed(ctx, o, lec.data, replica, s, oracle && lec.verify ? &lec.recorder : nullptr));
    if (ctx.is_root() && held_out.enabled() && runs.back().written) runs.back().test = evaluate(replica, held_out.data);
  }
  // The holes on known inputs: PowerSGD at full rank loses nothing (random
  // matrices of the model's shapes); top-k's decode is the serial mean
  const HoleProbe full_rank = powersgd_full_rank_probe(ctx.comm, shapes, o.seed + 7);
  const HoleProbe decode = topk_decode_probe(ctx.comm, 1000, 50, o.seed + 11);

  // --------------------------------------------------------------------------
  // 3. DiLoCo's laws, in brief: fewer messages instead of smaller ones
  DilocoLaws laws;
  if (f.compare) {
    say.section("3. DiLoCo in brief: one outer step per H inner steps (--mode diloco trains it); its laws");
    laws = diloco_laws(lec, f);
  }
  if (!ctx.is_root()) return;

  // --------------------------------------------------------------------------
  // 4. What each setting sent, reached and kept
  say.section(std::string(f.compare ? "4" : "3") + ". What each setting sent, reached and kept");
  Table table("ch10: " + std::to_string(ctx.world) + " ranks, " + std::to_string(o.steps) + " steps",
              {"setting", "final loss", "held-out acc.", "payload/step", "formula", "wire/step", "comm/step", "|sum delivered + e - sum g|"});
  std::vector<PlotPoint> points;
  for (const CompressedRun& r : runs) {
    const std::string name = r.setting.name();
    if (!r.written) { table.add_row({name, "not written yet", "-", "-", "-", "-", "-", "-"}); continue; }
    const double wire = wire_bytes(r.run.traffic, 0, r.steps);
    table.add_row({name, fixed(r.run.losses.back(), 4), held_out.enabled() ? fixed(100 * r.test.accuracy, 1) + "%" : "-",
                   format_bytes(measured_payload(r.run.traffic, 0, r.steps)),
                   format_bytes(payload_formula(r.setting.compress, shapes, ctx.world)), format_bytes(wire),
                   fmt(1e3 * r.run.sync_seconds / double(std::max<int64_t>(1, r.steps)), 3) + " ms", fmt(r.invariant_gap, 2)});
    if (held_out.enabled()) points.push_back({name, wire, r.test.accuracy, r.setting.error_feedback});
  }
  table.print(std::cout);
  say.say("wire/step: what a rank puts on the wire when the library collectives are rings; comm/step: rank 0's\n"
          "seconds in the gradient sync (compression included; with --link ethernet, a 10 GbE link's). The last column is\n"
          "error feedback's invariant on each rank (largest over ranks): with it, float rounding; without it\n"
          "(residual 0), what the compressor lost for good.");
  print_break_even(lec, shapes, settings);  // when the compressors' own work costs less than the bytes they save
  write_accuracy_plot(f.plot, "ch10: held-out accuracy against bytes, " + std::to_string(ctx.world) + " ranks, " +
                                  std::to_string(o.steps) + " steps", points);
  if (!f.plot.empty()) say.say("plot: " + f.plot);
  lec.summary.add_row({"the flags' own setting", f.mine.name()});
  if (held_out.enabled()) feedback_summary(lec.summary, runs);
  compression_verdicts(lec.verdicts, runs, shapes, ctx.world, decode, full_rank);
  if (f.compare) diloco_law_verdicts(lec.verdicts, laws, o.optimizer, ctx.world);
}

// ----------------------------------------------------------------------------
// flags (options.h), then the lecture on every rank

int main(int argc, char** argv) {
  Ch10Flags flags;
  Chapter chapter{"ch10_compression", "fewer bytes on the wire: gradient compression", {"--plot"}};
  chapter.default_ranks = 4;  // the page's first command: every verdict can fail
  chapter.defaults.steps = 100;  // enough for error feedback's gain to show (73 -> 77 % for top-k), quick at 4 ranks
  return run_chapter(argc, argv, chapter, [&flags](CLI::App& app, Options& o) { add_ch10_flags(app, o, flags); },
                     [&flags](Lecture& lec) { lecture(lec, flags); });
}
