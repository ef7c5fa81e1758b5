// ch15_3d_parallel — chapter 14's GPT split over a grid of ranks: tensor
// parallel inside each block (Megatron's), data parallel across copies.
//
// What it teaches: a transformer block splits over tp ranks with two
// exchanges each way. Attention splits by heads: a head needs only its own
// q, k and v features, so c_attn is column-parallel (rank t computes its
// heads' q, k, v), the heads run alone, and c_proj, which mixes every
// head's output, is row-parallel; the MLP is chapter 12's pair. f in front
// of each column-parallel layer and g after each row-parallel one are the
// block's only communication: two all-reduces of the residual stream (B·T·C
// floats) in forward, two in backward, counted from the traffic log. The
// model is the same whatever the layout: the shares' gradients, gathered,
// equal one device's on the global batch, and chapter 14's weights files
// load and save unchanged.
//
// With --sp, sequence parallelism (Megatron's): between the exchanges each
// TP rank holds T/tp positions of every sequence, and f and g become an
// all-gather and a reduce-scatter along the sequence — the same bytes,
// 1/tp of those regions' activations (sequence_parallel.h).
//
// What it leaves out (for now): pipeline stages,
// the planner — the page says what comes next. Theory: docs/ch15_3d_parallel.md.
//
// Run it:
//     build/reference/bin/ch15_3d_parallel                      # 4 rank threads: tp 2 × dp 2
//     build/reference/bin/ch15_3d_parallel --ranks 4 --tp 4 --check-groups
//     build/reference/bin/ch15_3d_parallel --ranks 4 --tp 2 --dp 2 --sp
//     build/reference/bin/ch15_3d_parallel --slow-rank 2 --gantt step.svg   # one step drawn, a straggler named
//     mpirun --oversubscribe -np 4 build/reference/bin/ch15_3d_parallel --comm mpi
//
// Your holes (chapters/15_3d_parallel/ch15.h): ch15::attention_slices and
// ch15::tp_attention; ch15::gather_sequence and ch15::scatter_sequence (--sp). It uses your chapter 12 (f, g, the parallel layers)
// and chapter 14 (attention, LayerNorm). Exit code: 0 all verdicts ✔, 3 one
// ✘, 1 error, 2 a bad flag.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <memory>

#include "ch14.h"
#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/holes.h"
#include "dpt/lecture.h"
#include "groups.h"
#include "outputs.h"
#include "pair_check.h"
#include "tp_checks.h"
#include "tp_gpt.h"
#include "tp_training.h"

using namespace dpt;
using namespace dpt::ch15;

namespace {
// Rank 0: the gathered model writes chapter 14's files and, with --sample, text.
void write_and_sample(const Ch15Flags& f, const std::vector<float>& values, const Corpus& text, const TpRun& result,
                      const Narrator& say) {
  Rng unused(0);
  Gpt whole(f.lm.shape, Device::host(), unused);
  set_flat_values(whole, values);
  LmRun as_ch14;
  as_ch14.train_loss = result.train_loss, as_ch14.held_out = result.held_out;
  write_ch14_outputs(f.lm, whole, text, as_ch14);  // nanoGPT's names, the whole model, whatever the layout
  if (f.lm.sample == 0) return;
  const std::string prompt = f.lm.prompt.empty() ? default_prompt(text) : f.lm.prompt;
  Rng sampler(f.lm.seed + 1);
  auto scores = [&whole](const std::vector<int64_t>& tokens) { return whole.forward(tokens, 1); };
  say.section(str("A sample from the gathered model: ", f.lm.sample, " characters after \"", prompt, "\""));
  try {
    std::cout << decode(text, ch14::generate(scores, f.lm.shape.context, encode(text, prompt), f.lm.sample, 1.0f, sampler))
              << "\n";
  } catch (const NotImplemented&) {
    say.say("  not yet: chapter 14's generate is not written");
  }
}
}  // namespace

// f is this rank's own copy: ranks may be threads of one process, and section 1 sets the vocabulary.
void lecture(ModelChapterRun& run, Ch15Flags f) {
  Context& ctx = run.ctx;
  const Narrator& say = run.say;
  Verdicts& v = run.verdicts;

  // --------------------------------------------------------------------------
  // 1. The text: chapter 14's characters.
  const Corpus text = load_text(f.lm.data, f.lm.shape.context, f.lm.seed);
  check_same_text(ctx.comm, text);
  f.lm.shape.vocab = text.vocab();
  say.section("1. The text: " + text.description);

  // --------------------------------------------------------------------------
  // 2. The grid: tp ranks share a model (neighbours: on a cluster, one node), dp models side by side.
  const Ch15Layout layout = ch15_layout(f, ctx.world);  // checked at the flags
  const int TP = layout.tp, DP = layout.dp;
  say.section(str("2. The grid: ", ctx.world, " ranks = tp ", TP, " x dp ", DP, " (TP innermost)",
                  f.sp ? ", sequence parallel" : ""));
  ch12::Groups groups(ctx, TP, DP);
  const std::vector<std::string> members = ch12::check_groups(ctx, groups);  // a wrong split stops here
  say.say(str("rank r sits at t = r mod ", TP, ", d = floor(r / ", TP, "): the tp ranks of a model are neighbours, since\n"
              "they exchange activations in every block; the dp ranks holding the same share average its gradient\n"
              "once per step. Every rank's groups were checked", f.check_groups ? ":" : " (--check-groups prints them)."));
  if (f.check_groups)  // asked for: printed under --quiet too
    for (const std::string& line : members) std::cout << "  " << line << "\n";

  // --------------------------------------------------------------------------
  // 3. The model, split: rank t holds heads [t·H/tp, (t+1)·H/tp) and a block of each MLP.
  Rng rng(f.lm.seed);
  Gpt full(f.lm.shape, Device::host(), rng);  // every rank: the same model from the same seed (or file)
  if (!f.lm.load_weights.empty()) load_ch14_weights(f.lm.load_weights, full, text);
  const GptShape& s = f.lm.shape;
  say.section(str("3. The model: ", describe(s), ", ", full.num_parameters(), " parameters, split over tp = ", TP));
  Table split("ch15: one block on rank t", {"tensor", "full", "rank t's share", "split"});
  split.add_row({"attn.c_attn", str("(", 3 * s.width, ", ", s.width, ")"), str("(", 3 * s.width / TP, ", ", s.width, ")"),
                 "your hole: heads t·H/tp … of q, k and v"});
  split.add_row({"attn.c_proj", str("(", s.width, ", ", s.width, ")"), "your hole", "your hole (bias whole)"});
  split.add_row({"mlp.c_fc", str("(", 4 * s.width, ", ", s.width, ")"), str("(", 4 * s.width / TP, ", ", s.width, ")"),
                 "column-parallel (rows)"});
  split.add_row({"mlp.c_proj", str("(", s.width, ", ", 4 * s.width, ")"), str("(", s.width, ", ", 4 * s.width / TP, ")"),
                 "row-parallel (columns; bias whole)"});
  split.add_row({"ln_1, ln_2, wte, wpe, ln_f, lm_head", "-", "whole", "replicated"});
  if (say.enabled()) split.print(std::cout);
  say.say("The embeddings, LayerNorms and the head are replicated: the residual stream is whole on every rank\n"
          "between the blocks' exchanges, so they need nothing from the other ranks, and a head over a few dozen\n"
          "characters is a sliver of the model (split by vocabulary, its softmax would need a third exchange).");
  Holes holes;
  std::unique_ptr<TensorParallelGpt> model;
  if (!holes.run(ctx.comm, [&] { model = std::make_unique<TensorParallelGpt>(groups.tp(), full, ctx.device); })) {
    say.say("  3.-5. skipped: not written yet (" + holes.last() + ")");
    if (ctx.is_root()) holes.judge(v);
    return;
  }
  const std::string slices = "attention_slices: rank t's shares = the block's entries its heads use, each entry once";
  if (TP == 1)
    v.cannot_fail(slices, "with --tp 1 (try --tp 2)");
  else
    v.at_most(slices, attention_slices_gap(ctx, groups.tp(), *model, full), 0,
              "indexed against the full block: q, k, v rows of the rank's heads; c_proj's columns they meet");

  const std::string pair = "gather_sequence, scatter_sequence: sequence parallelism's conjugate pair (--sp)";
  PairFindings pair_found;
  if (TP == 1)
    v.cannot_fail(pair, "with --tp 1 (try --tp 2)");
  else if (holes.run(ctx.comm, [&] { pair_found = check_sequence_pair(groups.tp(), ctx.device); }))
    add_pair_verdicts(ctx, v, pair_found);  // checked on every run; used by the blocks with --sp
  else
    say.say("  the sequence pair: not written yet (" + holes.last() + ")" + (f.sp ? "" : "; needed only by --sp"));

  // --------------------------------------------------------------------------
  // 4. Training: each TP group one model on its B windows, the DP groups average the shares' gradients.
  say.section(str("4. Training: ", f.lm.steps, " steps of ", DP, " x ", f.lm.batch, " sequences of ", s.context,
                  " characters (", f.lm.optimizer, ", lr ", f.lm.lr, ")"));
  TpRun result;  // --steps 0: nothing to train, the files are still written
  StepChart chart(f.chart, f.lm.steps, run.verify, ctx);  // one step's spans on every rank, and a straggler (--slow-rank)
  if (f.lm.steps > 0 && !holes.run(ctx.comm, [&] { result = train_tensor_parallel_gpt(ctx, groups, *model, text, f.lm, f.sp, run.verify, say, chart); })) {
    say.say("  skipped: not written yet (" + holes.last() + ")");
    if (ctx.is_root()) holes.judge(v);
    return;
  }
  if (ctx.is_root() && say.enabled() && !result.held_out.empty())
    say.say(str("held-out loss after ", result.held_out.back().step, " steps: ", fixed(result.held_out.back().loss, 4),
                " nats per character (ln V = ", fixed(std::log(double(s.vocab)), 4), ")"));
  report_step_chart(ctx, chart, f.chart, std::vector<int>(std::size_t(ctx.world), 0),  // one stage: every rank's row in it
                    str("tp ", TP, " x dp ", DP), v, say);

  // --------------------------------------------------------------------------
  // 5. What the TP group exchanged: two all-reduces per block each way.
  if (f.lm.steps > 0) say.section("5. What the TP group exchanged per step (its traffic log)");
  Table moved("ch15: TP collectives per step, this rank", {"pass", "calls", "floats each", "Megatron's count"});
  const double floats = double(f.lm.batch * s.context * s.width);
  for (const auto& [pass, m] : {std::pair<const char*, AllReduces>{"forward", result.forward},
                                std::pair<const char*, AllReduces>{"backward", result.backward}})
    moved.add_row({pass, fmt(m.calls, 4), m.calls > 0 ? fmt(m.bytes / 4 / m.calls, 6) : "-",
                   f.sp ? "0: the pair instead" : str(2 * s.layers, " of B·T·C = ", fmt(floats, 6))});
  if (f.sp) {  // the pair instead: what each call moved
    for (const auto& [pass, m] : {std::pair<const char*, Collectives>{"forward", result.sp_forward},
                                  std::pair<const char*, Collectives>{"backward", result.sp_backward}})
      for (const auto& [name, c] : {std::pair<const char*, AllReduces>{" all-gathers", m.all_gather},
                                    std::pair<const char*, AllReduces>{" reduce-scatters", m.reduce_scatter}})
        moved.add_row({std::string(pass) + name, fmt(c.calls, 4), c.calls > 0 ? fmt(c.bytes / 4 / c.calls, 6) : "-",
                       str(2 * s.layers, " of ", std::string(name) == " all-gathers" ? "B·T·C/tp" : "B·T·C")});
  }
  if (say.enabled() && f.lm.steps > 0) moved.print(std::cout);
  if (f.lm.steps > 0 && !f.sp) say.say("forward: g after attention's c_proj and after the MLP's c_proj; backward: f's, in front of c_attn and\n"
          "c_fc, each the gradient of the whole residual stream. Nothing else crosses the TP group.");
  if (f.lm.steps > 0 && f.sp) say.say("--sp: f is an all-gather of the T/tp positions each rank holds, g a reduce-scatter of the partial sums\n"
          "back to them; backward swaps them. After backward, one all-reduce sums the replicated tensors' gradients.");
  if (f.lm.steps > 0 && f.sp) add_sequence_parallel_verdicts(v, result, s, f.lm.batch, TP);
  else if (f.lm.steps > 0) add_traffic_verdicts(v, result, s, f.lm.batch, TP);

  // --------------------------------------------------------------------------
  // 6. The same model as one device's (tp_checks.cpp), and chapter 14's files.
  add_size_verdicts(ctx, v, *model, result, TP, DP, f.lm.steps > 0);  // collective
  const double spread = replicas_spread(ctx, *model);
  const std::vector<float> values = model->gather(false);  // the whole model on every rank of each TP group
  if (!ctx.is_root()) return;
  add_step_verdicts(v, result, text, f.lm, DP);
  if (ctx.world == 1)
    v.cannot_fail("every rank's gathered model holds the same weights after the last step", on_one_rank(4));
  else
    v.at_most("every rank's gathered model holds the same weights after the last step (max |w_r - w_0|)", spread, 0,
              "every share gets the same averaged gradient on its dp copies: bit for bit");
  holes.judge(v);
  write_and_sample(f, values, text, result, say);
  run.summary.add_row({"layout", str("tp ", TP, " x dp ", DP, f.sp ? " --sp" : "", " on ", ctx.world, " ranks")});
  run.summary.add_row({"parameters", str(parameters_per_rank(s, TP), " per rank of ", full.num_parameters())});
  if (DP > 1) run.summary.add_row({"DP bytes per step per rank", format_bytes(result.dp_bytes_per_step)});
  if (!result.held_out.empty()) run.summary.add_row({"held-out loss", fixed(result.held_out.back().loss, 4) + " nats"});
  if (f.lm.steps > 0) run.summary.add_row({"steps per second", fixed(double(f.lm.steps) / result.seconds, 2)});
}

int main(int argc, char** argv) {
  Ch15Flags flags;
  Chapter chapter{"ch15_3d_parallel", "a GPT split over a grid of ranks: tensor and data parallel"};
  chapter.default_ranks = 4;  // tp 2 x dp 2: a bare run's verdicts on both axes can fail
  return run_model_chapter(argc, argv, chapter, [&flags](CLI::App& app, Options&) { add_ch15_flags(app, flags); },
                           flags.lm.quiet, [&flags](ModelChapterRun& run) { lecture(run, flags); });
}
