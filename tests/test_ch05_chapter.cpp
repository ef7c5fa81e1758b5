// test_ch05_chapter.cpp — chapter 05's program, ch05_bucketing: training
// against one device (threads, mpirun -np 2 and 4, --accumulate), its
// verdicts, its schedule read back from the Chrome trace (grad-ready marks,
// launches, all-reduces), and its faults: errors while buckets are in flight,
// flags out of bounds or different across ranks.
#include "support/catch.h"
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/comm.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "support/single_device.h"

using namespace dpt;
using namespace dpt::ch05;

// ----------------------------------------------------------------------------
// the chapter: same weights as one device, overlap in the trace

namespace {
// small_problem's 32-16-4 MLP is 2384 bytes: cap 0 gives 4 buckets, 0.0005
// MiB (524 bytes) gives 2 ({fc1.b, fc1.w, fc0.b}, {fc0.w}), 1 MiB gives 1.
const char* kCaps[] = {"--bucket-mb 0", "--bucket-mb 0.0005", "--bucket-mb 1", "--bucket-mb 1 --first-bucket-mb 0"};

// check_matches_single_device for --accumulate K: the oracle's batch is the
// whole step's, 8 per rank per micro-batch.
void check_accumulate_matches_single_device(int ranks, int k, const std::string& extra, bool mpi = false) {
  INFO(ranks << (mpi ? " MPI processes" : " rank threads") << ", --accumulate " << k << " " << extra);
  std::string single = dpt_test::single_device_weights(8 * ranks * k);
  std::string dp = dpt_test::temp_path("ch05_accumulate.safetensors");
  std::string args = "--accumulate " + std::to_string(k) + " " + extra + " --no-verify " +
                     dpt_test::small_problem(8) + " --save-weights " + dp;
  auto run = mpi ? dpt_test::run_mpi("ch05_bucketing", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch05_bucketing", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(dpt_test::max_weight_difference(single, dp) < kSingleDeviceTolerance);
  std::remove(dp.c_str());
  std::remove(single.c_str());
}
}  // namespace

TEST_CASE("chapter: ch05 trains like one device for every bucket size (threads)", "[ch05]") {
  for (const char* caps : kCaps) dpt_test::check_matches_single_device("ch05_bucketing", 3, false, caps);
  dpt_test::check_matches_single_device("ch05_bucketing", 4, false, "--bucket-mb 0 --no-overlap");
  // Every parameter is reached here: the flag's graph walk must change nothing.
  dpt_test::check_matches_single_device("ch05_bucketing", 2, false, "--bucket-mb 0.0005 --find-unused-parameters");
}

TEST_CASE("chapter: with --accumulate K, ch05 trains like one device on the K-times batch", "[ch05]") {
  check_accumulate_matches_single_device(2, 3, "--bucket-mb 0");
  check_accumulate_matches_single_device(4, 2, "--bucket-mb 0.0005 --no-overlap");
}

TEST_CASE("chapter: under mpirun, ch05 trains 2 and 4 processes like one device", "[ch05][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) dpt_test::check_matches_single_device("ch05_bucketing", np, true, "--bucket-mb 0");
  check_accumulate_matches_single_device(2, 3, "--bucket-mb 0.0005", true);
}

TEST_CASE("chapter: ch05's verdicts pass with and without overlap and print the layout", "[ch05]") {
  for (const char* overlap : {"--overlap", "--no-overlap"}) {
    auto run = dpt_test::run_program("ch05_bucketing", std::string("--ranks 2 --steps 10 --model 64-32-32-4 "
                                                                   "--bucket-mb 0 ") + overlap);
    INFO(overlap << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 0);
    CHECK(run.output.find("fc2.bias, ") == std::string::npos);  // cap 0: one parameter per bucket
    std::size_t at = run.output.find("fc0.weight");
    REQUIRE(at != std::string::npos);
    CHECK(run.output.substr(run.output.rfind('\n', at) + 1, 3) == " 5 ");  // the last bucket holds the first layer
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

namespace {
// One rank's step as the --trace file shows it (microseconds).
struct TracedStep {
  std::map<std::string, double> ready;  // parameter name → its "grad ready NAME" mark
  std::map<int, double> launch;         // bucket → start of "launch bucket b" (rank track: the pack)
  std::map<int, double> reduce;         // bucket → start of "all-reduce bucket b" (async track, tid 1000 + r)
  double backward_end = -1;             // end of "backward (buckets launch)"
};

// (rank, step) → its TracedStep, read from the Chrome trace JSON with the
// events' "step" arguments.
std::map<std::pair<int, int>, TracedStep> read_traced_steps(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::pair<int, int>, TracedStep> steps;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("step")) continue;
    std::string name = e["name"];
    int tid = e["tid"], step = e["args"]["step"];
    double ts = e["ts"];
    TracedStep& s = steps[{tid % 1000, step}];
    auto bucket = [&] { return int(e["args"]["bucket"]); };
    if (name.rfind("grad ready ", 0) == 0) s.ready[name.substr(11)] = ts;
    if (name.rfind("launch bucket", 0) == 0) s.launch[bucket()] = ts;
    if (name.rfind("all-reduce bucket", 0) == 0) s.reduce[bucket()] = ts;
    if (name == "backward (buckets launch)") s.backward_end = ts + double(e["dur"]);
  }
  return steps;
}
}  // namespace

TEST_CASE("chapter: the trace shows each bucket launched and all-reduced after its parameters' grad-ready marks, "
          "some launched during backward with overlap, none without",
          "[ch05]") {
  // 256-256-256-256-10 at 0.25 MiB, by hand: fc3.bias (40 B), fc3.weight
  // (10 KiB), fc2.bias (1 KiB) fill bucket 0, which fc2.weight (256 KiB) would
  // overflow; each 256 KiB weight reaches the cap alone; each bias is alone
  // behind the weight that closed the bucket before it.
  const std::vector<std::vector<std::string>> layout = {
      {"fc3.bias", "fc3.weight", "fc2.bias"}, {"fc2.weight"}, {"fc1.bias"}, {"fc1.weight"}, {"fc0.bias"}, {"fc0.weight"}};
  for (bool overlap : {true, false}) {
    std::string path = dpt_test::temp_path(overlap ? "ch05_on.json" : "ch05_off.json");
    auto run = dpt_test::run_program("ch05_bucketing", std::string("--ranks 2 --steps 5 --quiet --no-verify "
                                                                   "--model 256-256-256-256-10 --bucket-mb 0.25 --trace ") +
                                                           path + (overlap ? "" : " --no-overlap"));
    INFO("overlap " << overlap << ": " << dpt_test::summary_line(run.output));
    REQUIRE((run.exit_code == 0 || run.exit_code == kVerdictFailed));  // an error (a hole) leaves no trace to read
    auto steps = read_traced_steps(path);
    CHECK(steps.size() == 2 * 5);  // ranks × steps
    // Launched during backward (the hook packs and queues the bucket: the
    // rank thread's own order, so deterministic) and all-reduce started during
    // backward (the progress thread's: that depends on the scheduler, so only
    // its absence without overlap is asserted; under a loaded ctest -j the
    // progress thread may get no CPU before backward ends).
    int launched_during_backward = 0, reduced_during_backward = 0;
    for (const auto& [key, s] : steps) {
      INFO("rank " << key.first << ", step " << key.second);
      REQUIRE(s.ready.size() == 8);
      REQUIRE(s.launch.size() == layout.size());
      REQUIRE(s.reduce.size() == layout.size());
      for (std::size_t b = 0; b < layout.size(); ++b) {
        double last_ready = 0;
        for (const std::string& name : layout[b]) last_ready = std::max(last_ready, s.ready.at(name));
        INFO("bucket " << b);
        CHECK(s.launch.at(int(b)) >= last_ready);  // packed only once every gradient in it is final
        CHECK(s.reduce.at(int(b)) >= last_ready);
        if (s.launch.at(int(b)) < s.backward_end) ++launched_during_backward;
        if (s.reduce.at(int(b)) < s.backward_end) ++reduced_during_backward;
      }
    }
    if (overlap) {
      CHECK(launched_during_backward > 0);
    } else {
      CHECK(launched_during_backward == 0);
      CHECK(reduced_during_backward == 0);
    }
    CHECK(run.exit_code == 0);
    std::remove(path.c_str());
  }
}

// ----------------------------------------------------------------------------
// faults: errors while buckets are in flight, flags that slip through, flags
// that differ across ranks (issue 23, items 2, 8 and 11)

TEST_CASE("chapter: an all-reduce that fails while buckets are in flight stops with its error, never a crash",
          "[ch05][faults][needs:assign_buckets][needs:mark_ready][needs:wait_and_unpack]") {
  // Rank 0 has one bucket, rank 1 one per parameter: their first rings send
  // different counts, and the error unwinds both ranks while later buckets
  // are still queued on their progress threads, whose jobs use the rank's
  // context. The check below is reached only if the process survives.
  auto run = [] {
    dpt_test::run_ranks(2, [](Context& ctx) {
      Options o;
      o.model = "32-16-4", o.samples = 256, o.batch = 8, o.steps = 3, o.quiet = true;
      Dataset data = load_dataset(o);
      MLP replica = make_replica(ctx, o);
      ch05::BucketPlan plan;
      plan.cap_bytes = plan.first_cap_bytes = ctx.rank == 0 ? 1 << 20 : 0;
      ch05::train_bucketed(ctx, o, data, replica, plan, "mismatched layouts");
    }, 10);
  };
  CHECK_THROWS_WITH(run(), contains_text("floats"));
}

TEST_CASE("chapter: bucket caps and --accumulate out of bounds are refused at parse time, naming the flag (exit 2)",
          "[ch05][faults]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--bucket-mb nan", "--bucket-mb"},         {"--first-bucket-mb nan", "--first-bucket-mb"},
      {"--bucket-mb inf", "--bucket-mb"},         {"--bucket-mb -1", "--bucket-mb"},
      {"--first-bucket-mb 1e7", "--first-bucket-mb"}, {"--accumulate 100000000", "--accumulate"},
      {"--accumulate 0", "--accumulate"},         {"--accumulate 40000 --batch 32", "--batch"}};
  for (const auto& [flags, name] : bad) {
    auto run = dpt_test::run_program("ch05_bucketing", "--ranks 2 --steps 2 " + flags);
    INFO(flags << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 2);  // a bad flag, as README promises; nan used to run with a cap of -2^63 bytes
    CHECK(run.output.find(name) != std::string::npos);
    CHECK(run.output.find("internal error") == std::string::npos);
  }
}

TEST_CASE("chapter: under mpirun, ranks started with different bucket caps are told which flag differs, no crash",
          "[ch05][mpi][faults]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // The command of issue 23 (item 2): one process per cap, with and without
  // overlap. It used to end in SIGSEGV (exit 139) inside a queued ring.
  for (const std::string extra : {"", " --no-overlap"}) {
    std::string program = dpt_test::program_path("ch05_bucketing");
    std::string args = " --comm mpi --comm-timeout 20 --steps 3 --samples 256" + extra;
    auto run = dpt_test::run_mpmd(program + args + " --bucket-mb 1", program + args + " --bucket-mb 0.01");
    INFO("extra flags '" << extra << "': " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("rank 1 was started with --bucket-mb 0.01") != std::string::npos);
    CHECK(run.output.find("rank 0 with --bucket-mb 1") != std::string::npos);
  }
}
