// test_ch07_chapter.cpp — chapter 07's program, ch07_zero, and its trainer:
// every stage gives stage 0's weights bit for bit (threads, mpirun -np 2 and
// 4) and stage 0 one device's; the trainer hands the step check only the
// steps rank 0's recorder keeps; memory per rank follows the ZeRO formulas;
// bytes per step follow theory; a capped device fails at stage 0 and trains
// at stage 3; bad and differing flags are refused naming them; the student
// build's copy_floats and divide_floats name a call that runs past its tensor.
// The holes' own tests: test_ch07.cpp, test_ch07_stages.cpp,
// test_ch07_layers.cpp; the checkpoints: test_ch07_checkpoint.cpp.
#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ch07.h"
#include "dpt/comm.h"
#include "dpt/data_parallel.h"
#include "dpt/floats.h"
#include "dpt/optim.h"
#include "dpt/step_check.h"
#include "support/ch07_weights.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "zero_engine.h"

using namespace dpt;
using namespace dpt::ch07;
using dpt_test::read_flat;

// ----------------------------------------------------------------------------
// the chapter

namespace {
// Ψ = 32·15+15 + 15·4+4 = 559: not divisible by 2, 3 or 4.
const std::string kProblem =
    "--quiet --model 32-15-4 --samples 256 --steps 12 --batch 8 --optimizer adamw --weight-decay 0.05 --lr 0.01";

// Runs ch07 (threads, or mpirun when np > 0) and returns its final weights, flat.
std::vector<float> chapter_weights(int ranks, const std::string& flags, bool mpi = false,
                                   const std::string& problem = kProblem) {
  std::string path = dpt_test::temp_path("ch07_" + std::to_string(ranks) + ".safetensors");
  std::string args = flags + " --no-verify " + problem + " --save-weights " + path;
  auto run = mpi ? dpt_test::run_mpi("ch07_zero", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(ranks << (mpi ? " processes " : " threads ") << flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  return read_flat(path);
}

// The oracle: the core's MLP and AdamW on one device with the global batch.
std::vector<float> one_device_weights(int world, const std::string& problem = kProblem) {
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.add_option("--weight-decay");
  app.parse(problem);
  Dataset data = load_dataset(o);
  MLP model = train_single_device(o, data, o.batch * world, [&o](std::vector<Tensor> params) {
    return std::make_unique<Adam>(std::move(params), o.lr, 0.9f, 0.999f, 1e-8f, 0.05f, true);  // AdamW, λ = 0.05
  });
  return flatten(model.parameters());
}

const char* kStages[] = {"--stage 1", "--stage 2", "--stage 2 --bucket-mb 1", "--stage 3",
                         "--stage 3 --prefetch"};
}  // namespace

TEST_CASE("chapter: every stage gives stage 0's weights bit for bit, and stage 0 one device's (threads)", "[ch07]") {
  for (int ranks : {3, 4}) {
    std::vector<float> stage0 = chapter_weights(ranks, "--stage 0");
    CHECK(max_abs_difference(stage0, one_device_weights(ranks)) < kSingleDeviceTolerance);
    for (const char* stage : kStages) {
      INFO(ranks << " ranks, " << stage);
      CHECK(max_abs_difference(chapter_weights(ranks, stage), stage0) == 0);  // same sums, same order, same Adam
    }
  }
}

TEST_CASE("chapter: on one rank every stage takes one device's steps bit for bit (the core's linear and Adam)",
          "[ch07]") {
  // One rank: the ring moves nothing and the mean divides by 1, so what is
  // left is zero_linear's forward and backward and the flat Adam — the same
  // kernels as the core's Linear, linear() and dpt::Adam, called in the same
  // order, so not one bit may differ. 64 outputs and a batch of 16: wide and
  // tall enough that a bias gradient summed in another order than the core's
  // sum_rows (e.g. a plain row loop; Eigen sums 4 rows at a time) differs.
  const std::string problem =
      "--quiet --model 32-64-10 --samples 256 --steps 6 --batch 16 --optimizer adamw --weight-decay 0.05 --lr 0.01";
  std::vector<float> one = one_device_weights(1, problem);
  for (const char* stage : {"--stage 0", "--stage 2", "--stage 3 --prefetch"}) {
    INFO(stage);
    CHECK(max_abs_difference(chapter_weights(1, stage, false, problem), one) == 0);
  }
}

TEST_CASE("chapter: stage 0 hands its buffers to the step check only on the steps rank 0's recorder keeps, "
          "asked every step",
          "[ch07]") {
  // On a GPU each recorded step copies Ψ parameters and gradients to the
  // host, so the engine asks the recorder's keeps() first, every step. A
  // budget of 3 snapshots (8Ψ bytes each) over 9 steps: stride (9 + 1) / 2 =
  // 5, so the recorder keeps steps 0, 5 and 8 (the last) on rank 0 and none
  // on rank 1, yet counts all 9 as run (the verdict says "3 of 9 steps").
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.add_option("--weight-decay");
  std::string problem = kProblem;
  problem.replace(problem.find("--steps 12"), 10, "--steps 9");
  app.parse(problem);
  Dataset data = load_dataset(o);
  const std::vector<float> initial = flatten(build_model(o, Device::host()).parameters());
  const std::size_t budget = 3 * 8 * initial.size();
  std::vector<StepCheck> checks(2);
  dpt_test::run_ranks(2, [&](Context& ctx) {
    StepRecorder recorder(ctx.is_root(), budget);
    ZeroPlan plan;  // stage 0, Adam's defaults
    plan.recorder = &recorder;
    train_zero(ctx, o, data, initial, plan, "test");
    checks[std::size_t(ctx.rank)] = recorder.replay(o, data, o.batch * ctx.world);
  });
  CHECK(checks[0].steps_run == 9);  // asked every step
  CHECK(checks[0].checked == std::vector<int64_t>{0, 5, 8});
  CHECK(checks[0].difference <= kStepGradientTolerance);
  CHECK(checks[1].checked.empty());  // rank 1's recorder is off: nothing handed over
}

TEST_CASE("chapter: under mpirun -np 2 and 4, every stage gives the threads' stage 0 weights", "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) {
    std::vector<float> stage0 = chapter_weights(np, "--stage 0");
    for (const char* stage : {"--stage 0", "--stage 1", "--stage 2", "--stage 3 --prefetch"}) {
      INFO(np << " processes, " << stage);
      CHECK(max_abs_difference(chapter_weights(np, stage, true), stage0) == 0);
    }
  }
}

namespace {
nlohmann::json chapter_report(int ranks, const std::string& flags) {
  std::string path = dpt_test::temp_path("ch07_report.json");
  auto run = dpt_test::run_program("ch07_zero", "--ranks " + std::to_string(ranks) + " --quiet --no-verify --steps 3 " +
                                                    "--model 64-128-96-10 --batch 4 " + flags + " --report-json " + path);
  INFO(flags << ": " << dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  std::ifstream in(path);
  nlohmann::json report = nlohmann::json::parse(in);
  std::remove(path.c_str());
  return report;
}
}  // namespace

TEST_CASE("chapter: per-rank memory follows the ZeRO formula plus named extras, bytes per step follow theory",
          "[ch07]") {
  const int n = 4;
  // 64-128-96-10: layers of 8,320, 12,384 and 970 floats; Ψ = 21,674 = 4·5418.5, padded by 2.
  const double layer[] = {64 * 128 + 128, 128 * 96 + 96, 96 * 10 + 10};
  const double psi = layer[0] + layer[1] + layer[2];
  const double shard = std::ceil(psi / n), padded = n * shard;
  // The formulas, written out here: fp32 weights, gradients, Adam m and v.
  const double held[] = {16 * padded, 8 * padded + 8 * shard, 4 * padded + 12 * shard, 16 * shard};
  // Comm buffers at most: none at stages 0-1; one open bucket (--bucket-mb 0.05 = 13,107 floats: every layer
  // alone, the largest 12,384) at stage 2; that and one gathered layer (the largest) at stage 3.
  const double comm[] = {0, 0, 4 * layer[1], 4 * (layer[1] + layer[1])};
  for (int stage = 0; stage <= 3; ++stage) {
    nlohmann::json report = chapter_report(n, "--stage " + std::to_string(stage) + " --bucket-mb 0.05");
    REQUIRE(report["ranks"].size() == std::size_t(n));
    CHECK(double(report["comm_formula_bytes"]) == comm[stage]);  // from the layout, never from the run
    double worst_peak = 0;
    for (const auto& rank : report["ranks"]) {
      INFO("stage " << stage << ", rank " << rank["rank"]);
      const auto& at = rank["at_peak"];
      double states = double(at["parameters"]) + double(at["gradients"]) + double(at["optimizer state"]);
      CHECK(states == held[stage]);  // exactly what the stage keeps, on the padded buffer
      INFO("comm buffers' own peak " << double(rank["peak"]["comm buffers"]) << " bytes, at most " << comm[stage]
                                     << ": one open bucket and one gathered layer at a time");
      CHECK(double(rank["peak"]["comm buffers"]) <= comm[stage]);
      worst_peak = std::max(worst_peak, double(rank["peak_total"]));
      // Bytes: 2 (stages 0-2) or 3 (stage 3) collectives of Ψ floats, (N−1)/N of each leaves a rank;
      // the ring moves N·S floats, so the padding's share is the only slack.
      double theory = (stage == 3 ? 3 : 2) * psi * 4 * (n - 1) / n;
      CHECK(std::fabs(double(rank["sent_per_step"]) - theory) <= 12 * (padded - psi));
    }
    // Stage 3's extras are real: the peak holds at least one gathered layer (the largest) beside the shards.
    if (stage == 3) CHECK(worst_peak >= held[3] + 4 * layer[1]);
  }
}

TEST_CASE("chapter: with --device-memory 2MiB the default model runs out of memory at stage 0, trains at stage 3",
          "[ch07]") {
  auto fail = dpt_test::run_program("ch07_zero", "--ranks 4 --steps 3 --quiet --no-verify --stage 0 --device-memory 2MiB");
  INFO(fail.output);
  CHECK(fail.exit_code == 1);
  CHECK_THAT(fail.output, contains_text("out of memory on cpu:") && contains_text("[rank ") &&
                              contains_text("asked for") && contains_text("in use") && contains_text("2.00 MiB capacity") &&
                              contains_text("--stage 2"));
  auto fits = dpt_test::run_program("ch07_zero", "--ranks 4 --steps 3 --quiet --stage 3 --device-memory 2MiB");
  INFO(dpt_test::summary_line(fits.output));
  CHECK(fits.exit_code == 0);
  auto bad = dpt_test::run_program("ch07_zero", "--ranks 2 --steps 1 --device-memory 2XB");
  CHECK(bad.exit_code == 2);  // refused at parse time, like every bad flag
  CHECK_THAT(bad.output, contains_text("--device-memory"));
}

TEST_CASE("chapter: on one rank ch07's ring, bytes and stage-0 verdicts say they cannot fail, the probes judge",
          "[ch07]") {
  auto run = dpt_test::run_program("ch07_zero", "--ranks 1 --steps 2 --quiet");
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("every rank sends only to its right neighbour; bytes sent per rank per step "
                                       "\u2014 cannot fail on 1 rank") &&
                             contains_text("max |w_stage3 - w_stage0| \u2014 cannot fail on 1 rank") &&
                             !contains_text("\u2714 every rank sends only"));
  // The probes run beyond the run's shape: they judge on one rank too.
  CHECK_THAT(run.output, contains_text("\u2714 the partition: every parameter in exactly one of N equal shards") &&
                             contains_text("\u2714 a probe bucket through on_bucket_ready at stages 0-3 on 3 ranks"));
}

TEST_CASE("chapter: a bad ch07 flag is refused at parse time, naming it (exit 2)", "[ch07]") {
  for (const char* bad : {"--bucket-mb nan", "--bucket-mb inf", "--weight-decay nan", "--weight-decay -0.1",
                          "--optimizer sgd", "--optimizer momentum"}) {
    auto run = dpt_test::run_program("ch07_zero", std::string("--ranks 2 --steps 1 --quiet ") + bad);
    INFO(bad << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, contains_text(std::string(bad).substr(0, std::string(bad).find(' '))));
  }
  auto help = dpt_test::run_program("ch07_zero", "--help");
  CHECK_THAT(help.output, contains_text("adam | adamw") && !contains_text("sgd |"));
}

TEST_CASE("chapter: under mpirun, ranks started with different ch07 flags stop naming the flag", "[ch07][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  const std::string program = dpt_test::program_path("ch07_zero") +
                              " --comm mpi --comm-timeout 20 --quiet --no-verify --steps 2 --model 32-15-4 --samples 64 ";
  // Rank 0 runs --stage 3; rank 1 the same but for one flag.
  for (const char* flag : {"--stage 1", "--stage 3 --prefetch", "--stage 3 --bucket-mb 0.01",
                           "--stage 3 --weight-decay 0.2"}) {
    auto run = dpt_test::run_mpmd(program + "--stage 3", program + flag);
    INFO(flag << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code != 0);
    std::string last = std::string(flag).substr(std::string(flag).rfind("--"));
    CHECK_THAT(run.output, contains_text(last.substr(0, last.find(' '))) &&
                               contains_text("every rank needs the same flags"));
  }
}

TEST_CASE("chapter: a chapter run that crashes is reported as a crash on a signal, not by its last line", "[ch07]") {
  // A hole's offset out of range is undefined behaviour where ranges are not
  // checked (the reference build): the --device-memory 2MiB run once died on
  // SIGSEGV and its test quoted the last line it printed.
  auto crash = dpt_test::run_command("sh -c 'echo all 11 checks passed; kill -SEGV $$'");
  INFO(crash.output);
  CHECK(crash.exit_code != 0);
  CHECK_THAT(dpt_test::summary_line(crash.output), contains_text("exited on signal 11 (SIGSEGV)") &&
                                                       contains_text("cmake --preset student"));
}

TEST_CASE("chapter: in the student build copy_floats and divide_floats name a call that runs past its tensor",
          "[ch07]") {
  if (!float_ranges_checked()) {
    WARN("skipped: only the student build (DPT_STUDENT=ON) checks float ranges");
    return;
  }
  Tensor small = Tensor::zeros({10}, Device::cpu(6)), big = Tensor::zeros({100}, Device::cpu(6));
  CHECK_THROWS_WITH(copy_floats(small.data() + 4, big.data(), 8),
                    contains_text("copy_floats: out of bounds") && contains_text("destination") &&
                        contains_text("floats [4, 12) of a tensor of 10 floats"));
  CHECK_THROWS_WITH(divide_floats(small.data() + 12, 3, 2.0f), contains_text("divide_floats: out of bounds"));
  CHECK_THROWS_WITH(add_floats(big.data(), small.data() + 9, 2), contains_text("add_floats: out of bounds") &&
                                                                     contains_text("source"));
  CHECK_NOTHROW(copy_floats(small.data() + 2, big.data() + 90, 8));  // inside both: fine
}
