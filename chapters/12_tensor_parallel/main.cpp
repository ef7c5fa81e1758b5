// ch12_tensor_parallel — one model split over several ranks: each layer pair
// of an MLP is shared by T ranks, as Megatron-LM splits a transformer's MLP.
//
// What it teaches: a linear layer split by output features (column-parallel)
// computes each rank's block of outputs from the whole input; the next layer,
// split by input features (row-parallel), leaves each rank with a share of
// its output. Two operators, f and g (your holes), are all the
// communication a pair needs; where they sit in the layers, and where their
// all-reduces go, forward and backward, is the chapter's question, and the
// step check and the byte count answer it. Tensor parallelism moves activations (it grows
// with the batch); data parallelism moves gradients (Ψ: it does not). With
// --dp D the two compose on T × D ranks through communicator groups.
//
// What it leaves out: attention heads (split the same way), sequence
// parallelism, overlapping the all-reduces with compute. Theory:
// docs/ch12_tensor_parallel.md.
//
// Run it:
//     build/reference/bin/ch12_tensor_parallel                           # bare: 4 rank threads, T = 4
//     build/reference/bin/ch12_tensor_parallel --ranks 2 --check-groups
//     mpirun --oversubscribe -np 4 build/reference/bin/ch12_tensor_parallel --comm mpi
//
// Your holes (chapters/12_tensor_parallel/ch12.h): ch12::copy_to_tp_region,
// ch12::reduce_from_tp_region, ch12::shard_weight, ch12::gather_weight,
// ch12::column_parallel_linear, ch12::row_parallel_linear. Exit code: 0 all
// verdicts ✔, 3 one ✘, 1 error, 2 a bad flag.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "ch12.h"
#include "dpt/data_parallel.h"
#include "dpt/lecture.h"
#include "dpt/ops.h"
#include "checks.h"
#include "groups.h"
#include "tp_model.h"
#include "tp_training.h"

using namespace dpt;
using namespace dpt::ch12;

struct Ch12Flags {
  int tp = 0;  // 0: world / dp
  int dp = 0;  // 0: world / tp (1 when neither is given)
  bool check_groups = false;
};


/// A bare run's ranks: T = 4, the page's first command, so every verdict can fail.
constexpr int kBareRanks = 4;

namespace {
std::string bytes(double b) { return format_bytes(b); }
}  // namespace

// ----------------------------------------------------------------------------
// the lecture

void lecture(Lecture& lec, const Ch12Flags& f) {
  Context& ctx = lec.ctx();
  const Options& o = lec.o;
  const Narrator& say = lec.say;
  Verdicts& v = lec.verdicts;
  const Layout groups_of = layout(f.tp, f.dp, ctx.world);  // checked at the flags
  const int T = groups_of.tp, D = groups_of.dp;

  // --------------------------------------------------------------------------
  // 1. Groups: who shares a model
  say.section("1. Groups: T = " + std::to_string(T) + " ranks share each model, D = " + std::to_string(D) + " models");
  Groups groups(ctx, T, D);
  const std::vector<std::string> members = check_groups(ctx, groups);  // a wrong split stops here, with a sentence
  say.say(str("rank r computes one model with the ", T, " ranks of its TP group (consecutive ranks: on a cluster,\n"
              "one node's GPUs, since they talk every layer); the ", D, " rank(s) holding the same slice form its DP group\n"
              "and average that slice's gradients. Every rank's groups were checked against this layout",
              f.check_groups ? ":" : " (--check-groups prints them)."));
  if (f.check_groups)
    for (const std::string& line : members) say.say("  " + line);
  v.holds("every rank's TP and DP groups hold the members the layout says", true,
          str(ctx.world, " ranks: TP groups of ", T, " consecutive ranks, DP groups of ", D, " with the same index"));

  // --------------------------------------------------------------------------
  // 2. The split: which slice each rank owns
  say.section("2. The split: each layer pair's slices on rank t");
  MLP full = build_model(o, Device::host());  // every rank builds the flags' model: the same, from the same seed
  const std::vector<int64_t>& w = full.widths();
  TensorParallelMLP model(groups.tp(), full, ctx.device);
  Table split("ch12: " + o.model + " over T = " + std::to_string(T), {"layer", "split", "full weight", "rank t's slice"});
  for (std::size_t l = 0; l + 1 < w.size(); ++l)
    split.add_row({"fc" + std::to_string(l), l % 2 == 0 ? "column-parallel (outputs)" : "row-parallel (inputs)",
                   str("(", w[l + 1], ", ", w[l], ")"),
                   l % 2 == 0 ? str("(", w[l + 1] / T, ", ", w[l], ") + bias (", w[l + 1] / T, ")")
                              : str("(", w[l + 1], ", ", w[l] / T, ") + bias (", w[l + 1], ") whole")});
  if (say.enabled()) split.print(std::cout);
  say.say("In each pair the first layer is split by output features, the second by input features: rank t's\n"
          "block of the hidden width flows from one to the other without leaving the rank. Before and after\n"
          "the pair the activations are whole on every rank. What the ranks must exchange, where, and in which\n"
          "pass, is for your operators and layers to decide: each layer must equal the unsplit one.");
  const int64_t psi = full.num_parameters(), per_rank = parameters_per_rank(w, T);
  v.at_most(str("parameters per rank = sum over pairs (in*h + h + h*out)/T + out = ", per_rank, " (Psi = ", psi, ")"),
            world_max(ctx, double(model.num_parameters() - per_rank)), 0, "counted on every rank from its slices");
  const std::string one_rank = D > 1 ? "with T = 1 (try --tp 2)" : on_one_rank(kBareRanks);
  const char* const slices_whole = "each rank's slices = the flags' weights it owns, entry by entry, each entry once";
  const char* const gathered = "slices cut by the chapter, put back together = the flags' model, bit for bit";
  bool slices_ok = true;  // else later verdicts blame section 2's holes, not f, g or the layers
  if (T == 1) {
    v.cannot_fail(slices_whole, one_rank);
  } else {  // each hole on its own: shard_weight's slices against the full weight, indexed here; gather_weight on
            // slices cut here, so a wrong shard_weight is never blamed on gather_weight
    const SliceGaps gaps = slices_against_full(model, full, groups.tp_rank(), T);
    const double by_output = world_max(ctx, gaps.output), by_input = world_max(ctx, gaps.input);
    const double gap = std::isnan(by_output) || std::isnan(by_input) ? NAN : std::max(by_output, by_input);
    auto part = [](const char* split, double g) {
      return str(split, g == 0 ? ": right" : std::isnan(g) ? ": a slice of the wrong shape" : str(": off by ", fmt(g, 3)));
    };
    v.at_most(slices_whole, gap, 0,
              gap == 0 ? "shard_weight on every rank: rank t's block of output features (Split::Output) and of input "
                         "features (Split::Input)"
                       : str("shard_weight on some rank, by split: ",
                             part("Split::Output (rank t's block of output features: the column layers' weights and "
                                  "biases)", by_output),
                             "; ", part("Split::Input (rank t's block of input features: the row layers' weights)",
                                        by_input)));
    say_verdict_now(say, v);
    const double round_trip = world_max(ctx, gathered_against_full(groups.tp(), full, ctx.device));
    slices_ok = gap == 0 && round_trip == 0;
    v.at_most(gathered, round_trip, 0, "gather_weight on every rank: every slice back in its place");
  }
  say_verdict_now(say, v);  // the two shard holes' feedback, before the layers are needed
  if (o.steps == 0) return lec.keep(full);

  // --------------------------------------------------------------------------
  // 3. Training: every rank of a TP group on the same samples
  say.section(str("3. Training: ", o.steps, " steps of ", o.batch, " samples per model (", D, " model",
                  D > 1 ? "s" : "", ", global batch ", o.batch * D, ")"));
  say.say(str("every rank of a TP group trains on the same ", o.batch, " samples; the optimizer steps each rank's slices."));
  judge_column_input_gradient(ctx, groups, v, one_rank);  // checks.cpp: x's gradient through a column layer, before training
  say_verdict_now(say, v);
  lec.step_check_batch = o.batch * D;
  lec.step_check_judges_start = false;  // no master copy here: section 2's round trip judged the start
  lec.step_check_cause = combining_cause(ctx, groups, model, o, lec.data, slices_ok);  // which way, if wrong
  TensorParallelRun run = train_tensor_parallel(ctx, groups, o, lec.data, model, &lec.recorder, "ch12 train");
  if (groups.dp_rank() == 0) gather_model(groups.tp(), model.pieces(), &full);  // whole on rank 0, scored and saved
  lec.keep(full);
  int64_t split_activations = 0;  // each pair's hidden block, before and after its ReLU
  for (std::size_t l = 1; l < w.size(); l += 2) split_activations += 2 * o.batch * w[l] / T;
  const double activation_gap = world_max(ctx, double(run.hidden_elements - split_activations));
  if (!ctx.is_root()) return;

  // --------------------------------------------------------------------------
  // 4. The same as one device?
  say.section("4. The same as one device?");
  BatchSampler first(lec.data.size(), o.batch * D, !o.no_shuffle, o.seed);
  MLP one = build_model(o, Device::host());
  Batch batch = gather_batch(lec.data, first.indices(0), Device::host());
  const double one_loss = softmax_cross_entropy(one.forward(batch.x), batch.y).item();
  say.say(str("step 0 loss: tensor parallel ", fmt(run.losses[0], 8), ", one device ", fmt(one_loss, 8)));
  if (T == 1) {
    v.cannot_fail("step 0: the split model's loss = one device's", one_rank);
  } else {
    v.at_most("step 0: |loss - one device's loss| / loss", std::fabs(run.losses[0] - one_loss) / std::fabs(one_loss),
              kForwardTolerance, slices_ok ? "sums in another order: ~1e-6 (argued in checks.h); a logit off by "
                                             "~0.1: ~1e-3 or more"
                                           : "the slices are not the flags' model: section 2's verdicts first");
  }
  if (lec.verify)
    say.say(str("every gradient: the slices' gradients gathered at ", lec.step_check().checked.size(),
                " steps, against one device's on the same ", o.batch * D, " samples (the step check's verdict)"));
  if (T == 1)
    v.cannot_fail("replicated biases (row-parallel) equal on every rank of a TP group", one_rank);
  else
    v.at_most("replicated biases (row-parallel) equal on every rank of a TP group", run.replicated_spread, 0,
              "each rank must get the same whole gradient for a bias it holds whole");

  // --------------------------------------------------------------------------
  // 5. What moved: activations, not gradients
  say.section("5. What moved: activations, not gradients");
  const int64_t per_sample = all_reduced_per_sample(w);
  const double tp_formula = 4.0 * double(o.batch) * double(per_sample), dp_formula = 4.0 * double(psi);
  Table moved("ch12: all-reduce payload per rank per step", {"scheme", "formula", "bytes", "measured"});
  moved.add_row({"tensor parallel (this run)", str("4 B x ", per_sample, " (B = ", o.batch, ")"), bytes(tp_formula),
                 bytes(run.tp_bytes_per_step) + str(" in ", fmt(run.tp_calls_per_step, 3), " calls")});
  moved.add_row({"data parallel, same model", "4 Psi", bytes(dp_formula), D > 1 ? "-" : "(not run)"});
  if (D > 1)
    moved.add_row({"  this run's DP groups (slices)", "4 x params per rank", bytes(4.0 * double(per_rank)),
                   bytes(run.dp_bytes_per_step)});
  if (say.enabled()) moved.print(std::cout);
  say.say("calls: the all-reduces your f and g made per step. Backward computes no gradient for the model's input\n"
          "(the batch is data, not a parameter), so nothing is exchanged for it in backward: the first pair makes\n"
          "one call fewer than the pairs after it.");
  const double crossover = double(psi) / double(per_sample);
  say.say(str("per sample and rank, tensor parallelism should all-reduce ", per_sample, " floats; this run's f and g moved ",
              fixed(run.tp_bytes_per_step / (4.0 * double(o.batch)), 1), "\n(which widths, and why: the chapter page, once your "
              "holes pass). Data parallelism all-reduces Psi = ", psi, " floats\nwhatever the batch. Crossover: B = Psi / ",
              per_sample, " = ", fixed(crossover, 0), " samples per model; below it tensor parallelism moves\nfewer bytes, "
              "above it more (and it moves them every layer, inside the step)."));
  v.near(str("TP all-reduce bytes per step = 4 B x ", per_sample), run.tp_bytes_per_step, tp_formula, 0,
         "payload from the TP group's traffic log, forward + backward");
  if (D > 1)
    v.near("DP all-reduce bytes per step = 4 x parameters per rank", run.dp_bytes_per_step, 4.0 * double(per_rank), 0,
           "each DP group averages the gradients of its slice only");
  v.at_most(str("split activations per rank = 2 B x sum of h/T = ", split_activations, " elements"), activation_gap, 0,
            "each pair's hidden block before and after its ReLU; the activations between pairs stay whole");
  lec.summary.add_row({"ranks", str(T, " (TP) x ", D, " (DP)")});
  lec.summary.add_row({"last loss", fixed(run.losses.back(), 4)});
  lec.summary.add_row({"TP bytes per step per rank", bytes(run.tp_bytes_per_step)});
  lec.summary.add_row({"time", fixed(run.seconds, 2) + " s"});
}

// ----------------------------------------------------------------------------
// flags, then the lecture

int main(int argc, char** argv) {
  Ch12Flags flags;
  auto add_flags = [&flags](CLI::App& app, Options& options) {
    limit_optimizers(app, {"sgd", "momentum", "adam", "adamw"}, "lars, lamb would see a slice's norm, not the layer's");
    app.add_option("--tp", flags.tp, "Ranks that share each layer pair (default: ranks / --dp, or all ranks)")
        ->check(integer_in(1, kMaxRanks));
    app.add_option("--dp", flags.dp, "Models trained side by side, data parallel over TP groups (default: ranks / --tp)")
        ->check(integer_in(1, kMaxRanks));
    app.add_flag("--check-groups", flags.check_groups, "Print every rank's TP and DP group members (always checked)");
    app.final_callback([&flags, &options, &app] {  // once --ranks and --model are known: exit 2 with a sentence
      const std::string comm = app.get_option("--comm")->as<std::string>();
      const CLI::Option* ranks = app.get_option("--ranks");
      const int world = comm != "threads" ? detect_process_environment().world : ranks->count() ? ranks->as<int>() : kBareRanks;
      const Layout l = layout(flags.tp, flags.dp, world);
      if (!l.problem.empty()) throw CLI::ValidationError("--tp", l.problem);
      const int T = l.tp;
      const std::string problem = tp_model_problem(parse_widths(options.model), T);
      if (!problem.empty()) throw CLI::ValidationError("--tp", problem);
    });
  };
  Options defaults;
  defaults.model = "784-256-64-256-10";
  return run_chapter(argc, argv, {"ch12_tensor_parallel", "tensor parallelism: one model split over ranks", {}, defaults, kBareRanks},
                     add_flags, [&flags](Lecture& lec) { lecture(lec, flags); });
}
