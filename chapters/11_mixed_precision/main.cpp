// ch11_mixed_precision — fewer bytes per parameter: bf16 and fp16 storage
// with fp32 master weights and loss scaling.
//
// What it teaches: storing weights, activations and gradients in 16 bits
// halves their bytes; bf16 (float32's range, 8 bits of precision) trains
// like fp32, fp16 (5 exponent bits) loses small gradients to underflow unless
// the loss is scaled up before backward, while the update must still be the
// loss's own; and a 16-bit weight cannot take an update smaller than half its
// step, hence an fp32 master copy beside it. Model states then cost 2 + 2 + 12
// bytes per parameter with Adam (ZeRO's K = 12), as chapter 07's ledger shows,
// and ZeRO divides them among N ranks (--stage, --ranks: section 7).
//
// Then activation recomputation (--recompute): forward keeps only checkpoints,
// backward recomputes the rest — the same gradients, bit for bit, for less
// peak memory and about a third more compute.
//
// 16-bit values are float32 tensors rounded to the format (the same numbers a
// 16-bit tensor holds, twice the bytes). With --device cuda the rounding runs
// as kernels and the Linear GEMMs as bf16/fp16 tensor-core GEMMs summing in
// fp32; on the CPU, fp32 GEMMs of the same values.
//
// What it leaves out: fp8, 16-bit storage itself, ZeRO's traffic and its
// layer-by-layer gathering (chapter 07). Theory: docs/ch11_mixed_precision.md.
//
// Run it:
//     build/reference/bin/ch11_mixed_precision                       # fp32, bf16, fp16 +/- scaling; ZeRO on 4 ranks
//     build/reference/bin/ch11_mixed_precision --precision fp16 --loss-scale static:1024
//     build/reference/bin/ch11_mixed_precision --no-compare --precision bf16 --loss-scale none
//     build/reference/bin/ch11_mixed_precision --no-compare --stage 3 --ranks 8   # 2+2+12 divided by 8
//
// Your holes (chapters/11_mixed_precision/ch11.h): ch11::update_loss_scale,
// ch11::master_step and ch11::recompute_backward. Exit code: 0 all verdicts ✔, 3 one ✘, 1 error, 2 bad flag.
#include <iostream>
#include <optional>

#include "ch11.h"
#include "ch11_flags.h"
#include "checks.h"
#include "dpt/lecture.h"
#include "mixed_training.h"
#include "sections.h"
#include "zero_mixed.h"

using namespace dpt;
using namespace dpt::ch11;

// ----------------------------------------------------------------------------
// the lecture. Flags, data, the held-out score of the flags' own setting and
// printing the summary and verdicts are the harness's (lecture.h).

void lecture(Lecture& lec, const Ch11Flags& f) {
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  Verdicts& v = lec.verdicts;
  // --device cuda: rounding runs as kernels, the Linear GEMMs on tensor cores (half_linear.h).
  Device& device = lec.device();
  Setting mine{parse_precision(f.precision), parse_loss_scale(f.loss_scale, f.growth_interval), f.loss_scale,
               parse_recompute(f.recompute)};
  if (o.steps == 0) return lec.keep(build_model(o, device));
  Parts parts(say, v);  // a hole not yet written stops only what needs it: the rest runs, and a ✘ names it

  // --------------------------------------------------------------------------
  // 1. Two 16-bit formats
  say.section("1. Two 16-bit formats: bf16 keeps the range, fp16 the digits");
  show_formats(say, v);

  // --------------------------------------------------------------------------
  // 2. Where the update must happen: your master_step on one weight
  say.section("2. An update smaller than half a 16-bit step");
  parts.run([&] { small_updates(say, v); });

  // --------------------------------------------------------------------------
  // 3. A step whose gradients overflowed
  say.section("3. A step whose gradients overflowed, and what the scaler does next");
  parts.run([&] { overflowed_step(o, device, say, v); });
  parts.run([&] { scaler_alone(o, device, say, v); });  // your update_loss_scale, written or not master_step

  // --------------------------------------------------------------------------
  // 4. Training side by side
  std::size_t mine_at = 0;
  const std::vector<Setting> settings = settings_to_train(mine, f.compare, f.growth_interval, mine_at);
  say.section("4. Training " + std::to_string(settings.size()) + " settings (" + std::to_string(o.steps) +
              " steps of " + std::to_string(o.batch) + ", " + o.optimizer + " lr " + fmt(o.lr) + ")");
  std::vector<std::optional<MixedRun>> runs(settings.size());  // empty: a hole it needs is not written
  std::vector<double> accuracy(settings.size(), 0);
  for (std::size_t i = 0; i < settings.size(); ++i)
    if (parts.run([&] { runs[i].emplace(train_mixed(o, lec.data, device, settings[i], say.enabled())); }) &&
        lec.held_out().enabled())
      accuracy[i] = 100 * evaluate(runs[i]->model, lec.held_out().data).accuracy;
  const bool all_ran = parts.all_ran();  // every training run
  lec.keep(runs[mine_at] ? runs[mine_at]->model : build_model(o, device));  // saved and scored at the end
  lec.summary.add_row({"the flags' own setting", mine.name()});
  if (runs[mine_at]) {  // --metrics: the flags' own run, step by step (tests/pytorch/crosscheck_ch11.py)
    const MixedRun& r = *runs[mine_at];
    MetricsWriter metrics(o.metrics);
    for (std::size_t t = 0; t < r.losses.size(); ++t)
      metrics.write(int64_t(t), {{"loss", r.losses[t]}, {"scale", r.scales[t]}, {"overflowed", r.overflowed[t] ? 1.0 : 0.0}});
  }

  // --------------------------------------------------------------------------
  // 5. What each setting reached, lost and held
  say.section("5. What each setting reached, lost and held");
  Table table("ch11: " + o.model + ", Psi = " + std::to_string(build_model(o, device).num_parameters()) + " parameters",
              {"setting", "last loss", "held-out acc.", "skipped steps", "last scale", "grads flushed to 0", "grads < normal",
               "bytes/param (formula)", "time"});
  for (std::size_t i = 0; i < settings.size(); ++i) {
    if (!runs[i]) { table.add_row({settings[i].name(), "not written yet", "-", "-", "-", "-", "-", "-", "-"}); continue; }
    const MixedRun& r = *runs[i];
    const BytesPerParam want = formula_bytes(settings[i].precision, o.optimizer), got = r.measured;
    table.add_row({settings[i].name(), fixed(r.losses.back(), 4), lec.held_out().enabled() ? fixed(accuracy[i], 1) + "%" : "-",
                   std::to_string(r.skipped()), fmt(r.scales.back(), 6), fixed(100 * r.underflow(), 3) + "%",
                   fixed(100 * r.flushes.tiny_fraction(), 1) + "%",
                   fmt(got.params, 3) + "+" + fmt(got.grads, 3) + "+" + fmt(got.state, 3) + " (" + fmt(want.params, 3) +
                       "+" + fmt(want.grads, 3) + "+" + fmt(want.state, 3) + ")",
                   fixed(r.seconds, 2) + " s"});
  }
  table.print(std::cout);
  say.say("bytes/param: parameters + gradients + optimizer state (the fp32 master copy and the moments),\n"
          "the ledger's elements per category at the format's width (16-bit values sit in float32 storage here).\n"
          "grads flushed: of the non-zero gradient entries the run stored (activations' and weights'), those rounded\n"
          "to 0; grads < normal: those below the format's smallest normal (fp16: 2^-14), 0 or subnormal (bits lost).");

  // --------------------------------------------------------------------------
  // 6. Recomputing activations: memory for compute
  say.section("6. Recomputing activations: one step of a deeper model per --recompute");
  parts.run([&] { recompute_section(o, device, mine.precision, f.recompute_model, say, v); },
            "section 6 ran: your recompute_backward on every-layer and sqrt");

  // --------------------------------------------------------------------------
  // 7. 2 + 2 + 12 bytes per parameter, divided by ZeRO
  say.section("7. Model states per rank under ZeRO stage " + f.stage + " on " + std::to_string(f.ranks) + " ranks, " +
              precision_name(mine.precision));
  if (mine.precision == Precision::FP32) {
    say.say("(fp32 under ZeRO is chapter 07's: --precision bf16 or fp16 shows the 2 + 2 + 12 bytes divided)");
  } else {
    parts.run([&] {
      std::vector<ZeroMixedRun> zero;
      for (int stage = 0; stage <= 3; ++stage)
        if (f.stage == "all" || f.stage == std::to_string(stage))
          zero.push_back(train_zero_mixed(o, lec.data, mine, stage, f.ranks, device.is_host_memory() ? "cpu" : "cuda"));
      report_zero_memory(zero, formula_bytes(mine.precision, o.optimizer), mine.precision, say, v);
    });
  }

  parts.judge();

  // --------------------------------------------------------------------------
  // 8. Verdicts from the training runs (checks.cpp)
  judge_training(o, settings, runs, accuracy, f.compare && all_ran, lec.held_out().enabled(), v);
}

// ----------------------------------------------------------------------------
// flags, then the lecture

int main(int argc, char** argv) {
  Ch11Flags flags;
  auto add_flags = [&flags](CLI::App& app, Options&) { add_ch11_flags(app, flags); };
  Options defaults;
  defaults.optimizer = "adam", defaults.lr = 1e-3f;
  return run_one_device_chapter(argc, argv, {"ch11_mixed_precision", "mixed precision: fewer bytes per parameter", {}, defaults},
                                add_flags, [&flags](Lecture& lec) { lecture(lec, flags); });
}
