// ch15_3d_parallel — chapter 14's GPT split over a grid of ranks: tensor
// parallel inside each block (Megatron's), pipeline stages over the blocks
// (chapter 13's schedules), data parallel across copies of the pipeline.
//
// What it teaches: a transformer block splits over tp ranks with two
// exchanges each way. Attention splits by heads (your hole: which of its
// entries a rank owns, and where its exchanges go); the MLP is chapter
// 12's pair. The block's only communication is two all-reduces of the
// residual stream (B·T·C floats) in forward and two in backward, counted
// from the traffic log. The
// model is the same whatever the layout: the shares' gradients, gathered,
// equal one device's on the global batch, and chapter 14's weights files
// load and save unchanged.
//
// With --sp, sequence parallelism (Megatron's): between the exchanges each
// TP rank holds T/tp positions of every sequence, and f and g change what
// they move along the sequence — the same bytes, 1/tp of those regions'
// activations (sequence_parallel.h).
//
// With --pp P the blocks split by depth over P stages (chapter 13's split),
// the embeddings on the first, ln_f and the head on the last; each stage's
// TP group runs its blocks as above, and M micro-batches flow through your
// chapter 13 run_schedule (1F1B or GPipe), their gradients combined by your
// accumulate_micro_batch (pipeline_gpt.h). The grid is tp × dp × pp, TP
// innermost, then DP, then PP (pipeline_grid.h): the axis that talks most
// on the nearest ranks. DP averages each share once per step.
//
// --plan ranks every layout of the ranks by predicted memory and step
// (planner.h); --run-top K trains the best and compares.
//
// What it leaves out (for now): ZeRO over the DP group, interleaved stages
// — the page says what comes next. Theory: docs/ch15_3d_parallel.md.
//
// Run it:
//     build/reference/bin/ch15_3d_parallel                      # 4 rank threads: tp 2 × dp 2
//     build/reference/bin/ch15_3d_parallel --ranks 4 --tp 4 --check-groups
//     build/reference/bin/ch15_3d_parallel --ranks 4 --tp 2 --dp 2 --sp
//     build/reference/bin/ch15_3d_parallel --ranks 8 --tp 2 --pp 2 --dp 2 --micro-batches 4
//     build/reference/bin/ch15_3d_parallel --plan --run-top 3 --memory-mib 2
//     build/reference/bin/ch15_3d_parallel --slow-rank 2 --gantt step.svg   # one step drawn, a straggler named
//     mpirun --oversubscribe -np 4 build/reference/bin/ch15_3d_parallel --comm mpi
//
// Your holes (chapters/15_3d_parallel/ch15.h): ch15::attention_slices and
// ch15::tp_attention; ch15::gather_sequence and ch15::scatter_sequence (--sp);
// ch15::grid_place; ch15::rank_state_bytes (--plan, and a verdict on every
// run). It uses your chapter 12 (f, g, the parallel layers), chapter 13
// (one_f_one_b, run_schedule, accumulate_micro_batch) and chapter 14
// (attention, LayerNorm). Exit code: 0 all verdicts ✔, 3 one
// ✘, 1 error, 2 a bad flag.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <memory>

#include "attention_checks.h"
#include "ch14.h"
#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/holes.h"
#include "dpt/lecture.h"
#include "pipeline_grid.h"
#include "outputs.h"
#include "pair_check.h"
#include "planner_check.h"
#include "planner_run.h"
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
  if (f.plan.plan) {  // --plan: the layouts ranked (planner_run.h), nothing trained
    Holes plan_holes;
    if (plan_holes.run(ctx.comm, [&] { run_plan(run, f, text); }) && ctx.is_root())
      add_plan_law_verdicts(v, plan_model_of(f), ctx.world);
    if (ctx.is_root()) plan_holes.judge(v);
    return;
  }

  // --------------------------------------------------------------------------
  // 2. The grid: tp ranks share a stage (neighbours: on a cluster, one node), dp pipelines side by side, pp stages.
  const Ch15Layout layout = ch15_layout(f, ctx.world);  // checked at the flags
  const int TP = layout.tp, DP = layout.dp, PP = layout.pp, M = layout.micro_batches;
  say.section(str("2. The grid: ", ctx.world, " ranks = tp ", TP, " x dp ", DP, " x pp ", PP,
                  " (TP innermost, then DP, then PP)", f.sp ? ", sequence parallel" : ""));
  Ch15Grid grid(ctx, TP, DP, PP);  // dpt::Grid's communicators, TP innermost
  Holes holes;
  GridPlace place;
  const bool placed = holes.run(ctx.comm, [&] { place = grid_place(ctx.rank, TP, DP, PP); });  // your hole
  const GridFindings found = check_grid_groups(ctx, grid, placed ? &place : nullptr);
  say.say(str("The tp ranks of a stage are neighbours, since they exchange activations in every block; the dp ranks\n"
              "holding the same share average its gradient once per step; the pp stages hand one micro-batch's\n"
              "activations to the next, the fewest bytes, so they may be farthest apart.\n",
              placed ? "Your grid_place was checked against every rank's groups"
                     : "grid_place: not written yet (" + holes.last() + "); the groups are dpt::Grid's",
              f.check_groups ? ":" : " (--check-groups prints them)."));
  if (f.check_groups)  // asked for: printed under --quiet too
    for (const std::string& line : found.lines) std::cout << "  " << line << "\n";
  if (placed && ctx.is_root()) add_grid_verdict(v, found, ctx.world);

  // --------------------------------------------------------------------------
  // 3. The model, split: rank t holds heads [t·H/tp, (t+1)·H/tp) and a block of each MLP.
  Rng rng(f.lm.seed);
  Gpt full(f.lm.shape, Device::host(), rng);  // every rank: the same model from the same seed (or file)
  if (!f.lm.load_weights.empty()) load_ch14_weights(f.lm.load_weights, full, text);
  const GptShape& s = f.lm.shape;
  say.section(str("3. The model: ", describe(s), ", ", full.num_parameters(), " parameters, split over tp = ", TP,
                  PP > 1 ? str(" and ", PP, " stages") : std::string()));
  Table split("ch15: one block on rank t", {"tensor", "full", "rank t's share", "split"});
  split.add_row({"attn.c_attn", str("(", 3 * s.width, ", ", s.width, ")"), str("1/", TP, " of it"), "your hole"});
  split.add_row({"attn.c_proj", str("(", s.width, ", ", s.width, ")"), str("1/", TP, " of it, bias whole"), "your hole"});
  split.add_row({"mlp.c_fc", str("(", 4 * s.width, ", ", s.width, ")"), str("(", 4 * s.width / TP, ", ", s.width, ")"),
                 "column-parallel (rows)"});
  split.add_row({"mlp.c_proj", str("(", s.width, ", ", 4 * s.width, ")"), str("(", s.width, ", ", 4 * s.width / TP, ")"),
                 "row-parallel (columns; bias whole)"});
  split.add_row({"ln_1, ln_2, wte, wpe, ln_f, lm_head", "-", "whole", "replicated"});
  if (say.enabled()) split.print(std::cout);
  say.say("The embeddings, LayerNorms and the head are replicated: the residual stream is whole on every rank\n"
          "between the blocks' exchanges, so they need nothing from the other ranks, and a head over a few dozen\n"
          "characters is a sliver of the model (split by vocabulary, its softmax would need a third exchange).");
  if (PP > 1) print_stages(s, PP, M, f.schedule, say);  // pipeline_gpt.h: which blocks each stage holds
  std::unique_ptr<TensorParallelGpt> model;
  if (!holes.run(ctx.comm, [&] { model = std::make_unique<TensorParallelGpt>(grid.tp(), full, ctx.device, grid.pp_rank(), PP); })) {
    say.say("  3.-5. skipped: not written yet (" + holes.last() + ")");
    if (ctx.is_root()) holes.judge(v);
    return;
  }
  // Your attention hole judged alone, on a small random block, before anything runs on it (attention_checks.h).
  bool attention_ok = true;
  if (TP == 1) {
    v.cannot_fail("attention_slices: its laws (each entry on one rank, a head's entries on its rank)", "with --tp 1 (try --tp 2)");
    v.cannot_fail("tp_attention: the group's output and gradients = one device's", "with --tp 1 (try --tp 2)");
  } else {
    attention_ok = add_slice_verdicts(ctx, grid.tp(), s, v);
    if (!holes.run(ctx.comm, [&] { attention_ok = add_attention_probe_verdicts(ctx, grid.tp(), s, v) && attention_ok; }))
      say.say("  tp_attention: not written yet (" + holes.last() + ")");
  }

  const std::string pair = "gather_sequence, scatter_sequence: sequence parallelism's conjugate pair (--sp)";
  PairFindings pair_found;
  bool pair_ok = true;
  if (TP == 1)
    v.cannot_fail(pair, "with --tp 1 (try --tp 2)");
  else if (holes.run(ctx.comm, [&] { pair_found = check_sequence_pair(grid.tp(), ctx.device); }))
    pair_ok = add_pair_verdicts(ctx, v, pair_found);  // checked on every run; used by the blocks with --sp
  else
    say.say("  the sequence pair: not written yet (" + holes.last() + ")" + (f.sp ? "" : "; needed only by --sp"));

  if (!attention_ok || (f.sp && !pair_ok)) {  // the same on every rank: the verdicts were agreed
    say.say("  4.-6. skipped: a hole above breaks its contract (its ✘ says which law); training on it would only blur that");
    if (ctx.is_root()) holes.judge(v);
    return;
  }

  // --------------------------------------------------------------------------
  // 4. Training: each pipeline one model on its B windows in M micro-batches, the DP groups average the shares' gradients.
  say.section(str("4. Training: ", f.lm.steps, " steps of ", DP, " x ", f.lm.batch, " sequences of ", s.context,
                  " characters", PP > 1 ? str(" in ", M, " micro-batches (", f.schedule, ")") : std::string(), " (",
                  f.lm.optimizer, ", lr ", f.lm.lr, ")"));
  TpRun result;  // --steps 0: nothing to train, the files are still written
  const PipelineSetting pipe{M, f.schedule};
  StepChart chart(f.chart, f.lm.steps, run.verify, ctx);  // one step's spans on every rank, and a straggler (--slow-rank)
  if (f.lm.steps > 0 && !holes.run(ctx.comm, [&] { result = train_tensor_parallel_gpt(ctx, grid, *model, text, f.lm, f.sp, pipe, run.verify, say, chart); })) {
    say.say("  skipped: not written yet (" + holes.last() + ")");
    if (ctx.is_root()) holes.judge(v);
    return;
  }
  if (ctx.is_root() && say.enabled() && !result.held_out.empty())
    say.say(str("held-out loss after ", result.held_out.back().step, " steps: ", fixed(result.held_out.back().loss, 4),
                " nats per character (ln V = ", fixed(std::log(double(s.vocab)), 4), ")"));
  std::vector<int> stage_of(std::size_t(ctx.world));  // every rank's stage, as the grid placed it: the chart's row groups
  const int my_stage = grid.pp_rank();
  ctx.comm.all_gather(&my_stage, stage_of.data(), 1);
  report_step_chart(ctx, chart, f.chart, stage_of, str("tp ", TP, " x dp ", DP, " x pp ", PP), v, say);

  // --------------------------------------------------------------------------
  // 5. What the TP group exchanged: two all-reduces per block each way.
  if (f.lm.steps > 0) say.section("5. What the TP group exchanged per step (its traffic log)");
  Table moved("ch15: TP collectives per step, this rank", {"pass", "calls", "floats each", "Megatron's count"});
  const double floats = double(f.lm.batch / M * s.context * s.width);
  const int64_t Ls = int64_t(model->blocks().size()) * M;  // this stage's blocks, once per micro-batch
  for (const auto& [pass, m] : {std::pair<const char*, AllReduces>{"forward", result.forward},
                                std::pair<const char*, AllReduces>{"backward", result.backward}})
    moved.add_row({pass, fmt(m.calls, 4), m.calls > 0 ? fmt(m.bytes / 4 / m.calls, 6) : "-",
                   f.sp ? "0: the pair instead" : str(2 * Ls, " of B/M·T·C = ", fmt(floats, 6))});
  if (f.sp) {  // the pair instead: what each call moved
    for (const auto& [pass, m] : {std::pair<const char*, Collectives>{"forward", result.sp_forward},
                                  std::pair<const char*, Collectives>{"backward", result.sp_backward}})
      for (const auto& [name, c] : {std::pair<const char*, AllReduces>{" all-gathers", m.all_gather},
                                    std::pair<const char*, AllReduces>{" reduce-scatters", m.reduce_scatter}})
        moved.add_row({std::string(pass) + name, fmt(c.calls, 4), c.calls > 0 ? fmt(c.bytes / 4 / c.calls, 6) : "-",
                       str(2 * Ls, " of ", std::string(name) == " all-gathers" ? "B/M·T·C/tp" : "B/M·T·C")});
  }
  if (say.enabled() && f.lm.steps > 0) moved.print(std::cout);
  if (f.lm.steps > 0 && !f.sp) say.say("forward: the ranks' partial sums of the residual stream; backward: the ranks' shares of its gradient.\n"
          "Nothing else crosses the TP group.");
  if (f.lm.steps > 0 && f.sp) say.say("--sp: the pair moves positions instead of the whole stream: the same bytes. After backward, one\n"
          "all-reduce sums the replicated tensors' gradients.");
  if (f.lm.steps > 0 && f.sp) add_sequence_parallel_verdicts(ctx, v, result, *model, f.lm.batch, M);
  else if (f.lm.steps > 0) add_traffic_verdicts(ctx, v, result, *model, f.lm.batch, M);
  if (f.lm.steps > 0) add_pipeline_bytes_verdict(ctx, v, result, *model, f.lm.batch, M, f.sp);  // collective
  if (f.lm.steps > 0 && ctx.is_root()) add_bubble_verdict(v, result, PP, M, f.schedule);

  // --------------------------------------------------------------------------
  // 6. The same model as one device's (tp_checks.cpp), and chapter 14's files.
  add_size_verdicts(ctx, v, *model, full, result, TP, DP, f.lm.steps > 0);  // collective
  if (!holes.run(ctx.comm, [&] { add_plan_verdicts(ctx, v, grid.tp(), full, text, f, PlanLayout{TP, PP, DP, M, f.sp, 0}, grid.pp_rank(), result, f.lm.steps > 0); }))
    say.say("  the planner's memory: not written yet (" + holes.last() + ")");
  const std::vector<float> values = gather_pipeline(grid.pp(), *model, false);  // the whole model, every stage's part
  const double spread = replicas_spread(ctx, values);
  if (!ctx.is_root()) return;
  add_step_verdicts(v, result, text, f.lm, DP, M);
  if (ctx.world == 1)
    v.cannot_fail("every rank's gathered model holds the same weights after the last step", on_one_rank(4));
  else
    v.at_most("every rank's gathered model holds the same weights after the last step (max |w_r - w_0|)", spread, 0,
              "every share gets the same averaged gradient on its dp copies: bit for bit");
  holes.judge(v);
  write_and_sample(f, values, text, result, say);
  run.summary.add_row({"layout", str("tp ", TP, " x dp ", DP, " x pp ", PP, f.sp ? " --sp" : "", " on ", ctx.world, " ranks")});
  run.summary.add_row({"parameters", str(counted_share_parameters(full, TP, 0, PP), " on rank 0 of ", full.num_parameters())});
  if (DP > 1) run.summary.add_row({"DP bytes per step per rank", format_bytes(result.dp_bytes_per_step)});
  if (!result.held_out.empty()) run.summary.add_row({"held-out loss", fixed(result.held_out.back().loss, 4) + " nats"});
  if (f.lm.steps > 0) run.summary.add_row({"steps per second", fixed(double(f.lm.steps) / result.seconds, 2)});
}

int main(int argc, char** argv) {
  Ch15Flags flags;
  Chapter chapter{"ch15_3d_parallel", "a GPT split over a grid of ranks: tensor, pipeline and data parallel"};
  chapter.default_ranks = 4;  // tp 2 x dp 2: a bare run's verdicts on both axes can fail
  return run_model_chapter(argc, argv, chapter, [&flags](CLI::App& app, Options&) { add_ch15_flags(app, flags); },
                           flags.lm.quiet, [&flags](ModelChapterRun& run) { lecture(run, flags); });
}
