// test_ch15_plan.cpp — chapter 15's planner. The hole (rank_state_bytes,
// the model state one rank of a layout holds) against the memory ledger of
// layouts run here on rank threads, and against laws: a pipeline's stages
// add up to the whole, ZeRO's stages divide by dp what chapter 07 says and
// nothing else, more TP ranks never hold more, sp and M hold the same. The
// enumeration against a brute-force list of every layout written here; the
// budget's overflow category; the program's --plan, --run-top and bad flags.
#include "support/catch.h"

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/comm.h"
#include "ch15.h"
#include "planner_report.h"
#include "planner.h"
#include "planner_check.h"
#include "support/ranks.h"
#include "support/run_program.h"

using namespace dpt;
using namespace dpt::ch15;

namespace {
// 4 blocks of 4 heads, width 16: tp up to 4, pp up to 4, on 8 ranks.
PlanModel plan_test_model() {
  PlanModel m;
  m.shape = GptShape{/*vocab*/ 11, /*context*/ 8, /*layers*/ 4, /*heads*/ 4, /*width*/ 16};
  m.batch = 4;
  return m;
}

PlanLayout plan_test_layout(int tp, int pp, int dp, int zero = 0) { return PlanLayout{tp, pp, dp, 1, false, zero}; }

// The model state of the stage with the most parameters: a hole that throws
// for a stage is reported by Catch with its message.
RankMemory plan_test_state(const PlanModel& m, const PlanLayout& l, int stage) { return rank_state_bytes(m, l, stage); }
}  // namespace

TEST_CASE("planner: the enumeration lists every layout that divides the model, each once", "[ch15][plan]") {
  const PlanModel m = plan_test_model();
  for (int world : {1, 4, 6, 8}) {
    std::set<std::string> expected;  // brute force, the conditions written here
    for (int tp = 1; tp <= world; ++tp)
      for (int pp = 1; pp <= world; ++pp)
        for (int dp = 1; dp <= world; ++dp)
          for (int micro = 1; micro <= m.batch; ++micro)
            for (int sp = 0; sp < 2; ++sp)
              for (int zero = 0; zero < 4; ++zero) {
                const bool fits = tp * pp * dp == world && m.shape.heads % tp == 0 && m.shape.layers % pp == 0 &&
                                  m.batch % micro == 0 && (pp > 1 || micro == 1) &&
                                  (!sp || (tp > 1 && m.shape.context % tp == 0)) && (zero == 0 || dp > 1);
                if (fits) expected.insert(PlanLayout{tp, pp, dp, micro, sp == 1, zero}.name());
              }
    std::vector<std::string> listed;
    for (const PlanLayout& l : enumerate_layouts(m, world)) listed.push_back(l.name());
    INFO("on " << world << " ranks");
    std::set<std::string> unique(listed.begin(), listed.end());
    CHECK(unique.size() == listed.size());  // each once
    CHECK(unique == expected);              // every dividing layout, no other (tp 8 > 4 heads is absent)
  }
  CHECK(!layout_problem(m, PlanLayout{8, 1, 1, 1, false, 0}, 8).empty());
  CHECK(!layout_problem(m, PlanLayout{1, 8, 1, 1, false, 0}, 8).empty());
}

TEST_CASE("planner hole: a rank's model state equals the memory ledger's on layouts run here", "[ch15][plan][hole:rank_state_bytes]") {
  Ch15Flags f;
  f.lm.shape = GptShape{0, 8, 2, 4, 16};
  f.lm.batch = 2;
  const Corpus text = load_text("synthetic", f.lm.shape.context, 1);
  f.lm.shape.vocab = text.vocab();
  for (const char* optimizer : {"adamw", "sgd"})
    for (int tp : {1, 2, 4}) {
      f.lm.optimizer = optimizer;
      const PlanModel m{f.lm.shape, f.lm.batch, f.lm.optimizer != "sgd"};
      const RankMemory want = plan_test_state(m, plan_test_layout(tp, 1, 1), 0);
      std::vector<RankMemory> seen(static_cast<std::size_t>(tp), RankMemory{});
      dpt_test::run_ranks(tp, [&](Context& ctx) {
        Rng rng(3);
        const Gpt full(f.lm.shape, Device::host(), rng);
        seen[std::size_t(ctx.rank)] = ledger_memory(ctx.comm, full, text, f, false, ctx.device);
      });
      for (int t = 0; t < tp; ++t) {
        INFO("tp " << tp << ", rank " << t << ", " << optimizer << ": rank_state_bytes must equal what the ledger "
                   "measured on the rank's own tensors (each tensor a TP rank holds whole counts whole)");
        CHECK(want.params == seen[std::size_t(t)].params);
        CHECK(want.grads == seen[std::size_t(t)].grads);
        CHECK(want.state == seen[std::size_t(t)].state);
      }
    }
}

TEST_CASE("planner hole: a pipeline's stages hold the whole model state between them, each tensor once", "[ch15][plan][hole:rank_state_bytes]") {
  const PlanModel m = plan_test_model();
  const RankMemory whole = plan_test_state(m, plan_test_layout(1, 1, 1), 0);
  for (int pp : {2, 4}) {
    double params = 0, grads = 0, state = 0;
    for (int s = 0; s < pp; ++s) {
      const RankMemory r = plan_test_state(m, plan_test_layout(1, pp, 1), s);
      params += r.params, grads += r.grads, state += r.state;
    }
    INFO("pp " << pp << ": the stages' parameters, gradients and optimizer state must sum to one rank's at pp 1");
    CHECK(params == whole.params);
    CHECK(grads == whole.grads);
    CHECK(state == whole.state);
  }
}

TEST_CASE("planner hole: ZeRO divides by dp the state, then the gradients, then the weights, nothing more", "[ch15][plan][hole:rank_state_bytes]") {
  const PlanModel m = plan_test_model();
  for (int dp : {2, 4}) {
    const RankMemory z0 = plan_test_state(m, plan_test_layout(2, 1, dp, 0), 0);
    const RankMemory z1 = plan_test_state(m, plan_test_layout(2, 1, dp, 1), 0);
    const RankMemory z2 = plan_test_state(m, plan_test_layout(2, 1, dp, 2), 0);
    const RankMemory z3 = plan_test_state(m, plan_test_layout(2, 1, dp, 3), 0);
    INFO("dp " << dp << ": stage 1 divides the optimizer state by dp, stage 2 the gradients too, stage 3 the weights too");
    CHECK(z1.state * dp == Approx(z0.state).epsilon(1e-12));
    CHECK((z1.params == z0.params && z1.grads == z0.grads));
    CHECK(z2.grads * dp == Approx(z0.grads).epsilon(1e-12));
    CHECK((z2.params == z0.params && z2.state == z1.state));
    CHECK(z3.params * dp == Approx(z0.params).epsilon(1e-12));
    CHECK((z3.grads == z2.grads && z3.state == z1.state));
    INFO("without ZeRO, data parallel copies the model state: dp must not change it");
    CHECK(z0.params == plan_test_state(m, plan_test_layout(2, 1, 1, 0), 0).params);
  }
}

TEST_CASE("planner hole: more TP ranks never hold more, sp and micro-batches change no model state", "[ch15][plan][hole:rank_state_bytes]") {
  const PlanModel m = plan_test_model();
  double previous = 1e300;
  for (int tp : {1, 2, 4}) {
    const RankMemory r = plan_test_state(m, plan_test_layout(tp, 1, 1), 0);
    INFO("tp " << tp << ": a rank's parameters must not grow with tp, and must stay above the whole ÷ tp (the "
                    "embeddings, LayerNorms and head are whole on every TP rank)");
    CHECK(r.params <= previous);
    if (tp > 1) CHECK(r.params * tp > plan_test_state(m, plan_test_layout(1, 1, 1), 0).params);
    previous = r.params;
    INFO("a rank's gradients are one per parameter; Adam keeps two slots per parameter");
    CHECK(r.grads == r.params);
    CHECK(r.state == 2 * r.params);
  }
  const RankMemory plain = plan_test_state(m, PlanLayout{2, 2, 1, 1, false, 0}, 0);
  const RankMemory sp_micro = plan_test_state(m, PlanLayout{2, 2, 1, 4, true, 0}, 0);
  INFO("sp splits activations, M splits the batch: neither moves a parameter");
  CHECK((plain.params == sp_micro.params && plain.grads == sp_micro.grads && plain.state == sp_micro.state));
}

TEST_CASE("planner: over the budget, a layout comes after every one that fits and names its largest category",
          "[ch15][plan][needs:rank_state_bytes]") {
  const PlanModel m = plan_test_model();
  PlanMachine machine;
  machine.per_node = 4, machine.gflops = 10;
  std::vector<PlanEntry> all = make_plan(m, 8, machine, 0);
  std::vector<double> totals;
  for (const PlanEntry& e : all) totals.push_back(e.memory.total());
  std::sort(totals.begin(), totals.end());
  const double budget = totals[totals.size() / 2];  // about half fit
  const std::vector<PlanEntry> plan = make_plan(m, 8, machine, budget);
  REQUIRE(plan.size() == all.size());
  bool over_seen = false;
  for (const PlanEntry& e : plan) {
    INFO(e.layout.name() << ": " << e.memory.total() << " bytes against a budget of " << budget);
    CHECK(e.overflow.empty() == (e.memory.total() <= budget));
    if (!e.overflow.empty()) {
      over_seen = true;
      const std::array<std::pair<double, std::string>, 4> parts{{{e.memory.params, "parameters"},
                                                                 {e.memory.grads, "gradients"},
                                                                 {e.memory.state, "optimizer state"},
                                                                 {e.memory.activations, "activations"}}};
      const double largest = std::max({e.memory.params, e.memory.grads, e.memory.state, e.memory.activations});
      bool named_largest = false;
      for (const auto& [bytes, name] : parts) named_largest = named_largest || (name == e.overflow && bytes == largest);
      CHECK(named_largest);
    } else {
      CHECK_FALSE(over_seen);  // every fitting layout before the first that does not fit
    }
  }
  CHECK(over_seen);
}

TEST_CASE("planner: a group inside a node rides the fast link, and the bubble is (P-1)/(M+P-1) of the pipelined time",
          "[ch15][plan][needs:rank_state_bytes]") {
  const PlanModel m = plan_test_model();
  PlanMachine machine;
  machine.intra = link_preset("nvlink"), machine.inter = link_preset("ethernet"), machine.gflops = 1;
  auto tp_seconds = [&](int per_node) {
    machine.per_node = per_node;
    return predict_step(m, PlanLayout{2, 1, 2, 1, false, 0}, machine).tp;
  };
  INFO("TP is innermost: its 2 ranks share a node of 2 or 4 ranks, and cross nodes only when each node holds 1");
  CHECK(tp_seconds(2) == tp_seconds(4));
  CHECK(tp_seconds(1) > tp_seconds(2));
  machine.per_node = 8;
  for (int micro : {1, 2, 4}) {
    const PlanStep st = predict_step(m, PlanLayout{1, 4, 2, micro, false, 0}, machine);
    INFO("pp 4, M " << micro << ": the idle share of (compute + TP + bubble) is chapter 13's (P-1)/(M+P-1)");
    CHECK(st.bubble / (st.bubble + st.compute + st.tp) == Approx(3.0 / (micro + 3)).epsilon(1e-12));
  }
}

TEST_CASE("planner: Spearman's rho is 1 on one order, -1 on its reverse, ties at their mean rank", "[ch15][plan]") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1));
  CHECK(spearman({1, 2, 3, 4}, {40, 30, 20, 10}) == Approx(-1));
  CHECK(spearman({1, 2, 3}, {2, 1, 3}) == Approx(0.5));
  CHECK(spearman({1, 1, 2}, {1, 2, 3}) == Approx(0.8660254).epsilon(1e-6));  // ranks 1.5, 1.5, 3
}

namespace {
const std::string kPlanFlags = "--data synthetic --layers 2 --heads 4 --width 32 --context 16 --batch 2 --quiet ";
}

TEST_CASE("chapter: ch15 --plan prints the layouts best first, over-budget ones last, and trains nothing",
          "[ch15][plan][needs:rank_state_bytes]") {
  auto run = dpt_test::run_program("ch15_3d_parallel", kPlanFlags + "--ranks 4 --plan --gflops 5 --memory-mib 0.6");
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("ch15 plan: best first") != std::string::npos);
  CHECK(run.output.find("tp 4 pp 1 dp 1 M 1 zero 0") != std::string::npos);
  CHECK(run.output.find("overflows") != std::string::npos);
  CHECK(run.output.find("held-out loss") == std::string::npos);
  const std::size_t fits = run.output.rfind("  yes"), over = run.output.find("no: ");
  CHECK((fits != std::string::npos && over != std::string::npos && fits < over));
}

TEST_CASE("chapter: ch15 --plan --run-top 3 on 4 ranks prints predicted, measured and the rank correlation",
          "[ch15][plan][needs:rank_state_bytes]") {
  auto run = dpt_test::run_program("ch15_3d_parallel", kPlanFlags + "--ranks 4 --plan --run-top 3 --gflops 5");
  INFO(run.output);
  CHECK((run.exit_code == 0 || run.exit_code == 3));  // the verdict can fail on a loaded machine: times are measured
  CHECK(run.output.find("predicted and measured step") != std::string::npos);
  CHECK(run.output.find("Spearman's rho = ") != std::string::npos);
  CHECK(run.output.find("Spearman's rank correlation of predicted and measured steps") != std::string::npos);
  // What the runner skips it names: ZeRO layouts (not trained by chapter 15); pipelines run.
  CHECK(runnable_problem(plan_test_layout(2, 1, 2, 1)).rfind("not runnable in this build", 0) == 0);
  CHECK(runnable_problem(PlanLayout{2, 2, 2, 2, true, 0}).empty());
  auto two = dpt_test::run_program("ch15_3d_parallel", kPlanFlags + "--ranks 2 --plan --run-top 2 --gflops 5");
  INFO(two.output);
  CHECK(two.exit_code == 0);
  CHECK(two.output.find("\u2014 Spearman's rank correlation") != std::string::npos);  // cannot fail, never ✔
  CHECK(two.output.find("\u2714 Spearman") == std::string::npos);
}

TEST_CASE("chapter: ch15's planner flags reject bad values in one line, exit 2", "[ch15][plan]") {
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& bad : {Bad{"--ranks 4 --run-top 3", "--run-top needs --plan"},
                         Bad{"--ranks 4 --plan --nodes 3", "--nodes 3 does not divide"},
                         Bad{"--ranks 4 --nodes 2", "--nodes and --gflops need --plan"},
                         Bad{"--ranks 4 --plan --link-intra copper", "--link-intra"},
                         Bad{"--ranks 4 --plan --memory-mib -1", "--memory-mib"},
                         Bad{"--ranks 4 --plan --run-top 0", "--run-top"}}) {
    auto run = dpt_test::run_program("ch15_3d_parallel", kPlanFlags + bad.args);
    INFO(bad.args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(bad.says) != std::string::npos);
  }
}

TEST_CASE("chapter: under mpirun -np 4 ch15 --plan --run-top 3 ranks, trains and compares as under threads",
          "[ch15][plan][mpi][needs:rank_state_bytes]") {
  if (!dpt::mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  // mpirun under the asan preset: Open MPI keeps allocations until exit (as test_ch15_chapter.cpp says).
  auto run = dpt_test::run_command("ASAN_OPTIONS=detect_leaks=0 " + dpt_test::launcher() + " -np 4 " +
                                   dpt_test::program_path("ch15_3d_parallel") + " --comm mpi --comm-timeout 30 " +
                                   kPlanFlags + "--plan --run-top 3 --gflops 5");
  INFO(run.output);
  CHECK((run.exit_code == 0 || run.exit_code == 3));  // measured times: the verdict may fail on a loaded machine
  CHECK(run.output.find("ch15 plan: best first") != std::string::npos);
  CHECK(run.output.find("Spearman's rho = ") != std::string::npos);
}
