// test_ch16_zero.cpp — chapter 16's --zero run: ZeRO-1's cut and its inverse
// lose nothing; a crash on 4 ranks under each recovery ends with every verdict
// ✔ (the momentum equal to an independent replay's); a planted stale buddy
// copy or a re-cut one float late turns the momentum verdict ✘; plans a
// policy cannot survive exit 2 naming the flag. Every --zero step ends in the
// student's commit_step on the member's shard: judged alone in the run, and
// here on shards that differ by member (ch16.h's ZeRO-1 clause).
#include "support/catch.h"

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "ch16.h"
#include "dpt/quorum_group.h"
#include "support/run_program.h"
#include "zero_rank.h"

using namespace dpt::ch16;

namespace {

dpt_test::ProgramResult run_zero16(const std::string& args) {
  return dpt_test::run_program("ch16_fault_tolerance", "--ranks 4 --quiet --steps 16 --samples 128 --zero " + args);
}

bool zero16_has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

const std::vector<std::string> kZeroVerdicts = {
    "the run finished on the plan's ranks", "replicas identical", "the run = one device replaying the ledger",
    "momentum gathered from the shards = the replay's", "the ledger consumed every sample of every epoch exactly once",
    "every slot committed, dropped, or lost to a rollback"};

// commit_step's verdicts, judged alone before a --zero run (commit_probe.cpp).
const std::vector<std::string> kZeroCommitProbe = {"✔ commit_step, every member fine: true on every member",
                                                   "✔ commit_step, rank 3 not fine: false on every member"};

}  // namespace

TEST_CASE("zero: every member's shard, put back in place and summed, is the whole vector", "[ch16]") {
  std::vector<float> flat(11);
  for (std::size_t k = 0; k < flat.size(); ++k) flat[k] = float(k) + 0.5f;
  for (int n : {1, 2, 3, 4, 5, 11, 13}) {
    std::vector<float> sum(flat.size(), 0.0f);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> shard = zero_shard_of(flat, i, n);
      CHECK(int64_t(shard.size()) == (11 + n - 1) / n);  // S = ceil(Ψ/n), padding included
      const std::vector<float> placed = zero_place_shard(shard, 11, i, n);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += placed[k];
    }
    INFO("n = " << n);
    CHECK(sum == flat);
  }
}

TEST_CASE("zero: commit_step on ZeRO-1 shards applies each member's own slice, on all or none", "[ch16][hole:commit_step]") {
  // Member m owns a shard unlike the others' and passes its own slice of the summed gradient.
  auto shard_of = [](int m) { return Replica{{float(m), 1.0f - float(m), 0.5f}, {0.25f * float(m), -0.5f, 0.0f}}; };
  auto slice_of = [](int m) { return std::vector<float>{0.1f * float(m + 1), -0.3f, float(m) - 1.0f}; };
  for (int no : {-1, 1}) {  // everyone fine; member 1 not fine
    auto group = dpt::make_threads_group(3, 20.0);
    std::vector<Replica> after(3);
    std::vector<std::string> said(3);
    std::vector<std::thread> threads;
    for (int m = 0; m < 3; ++m)
      threads.emplace_back([&, m] {
        after[std::size_t(m)] = shard_of(m);
        try {
          said[std::size_t(m)] = commit_step(*group[std::size_t(m)], after[std::size_t(m)], slice_of(m), 0.5f, m != no)
                                     ? "true" : "false";
        } catch (const std::exception& e) {  // the hole unwritten, or any other error: its words, in the check
          said[std::size_t(m)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int m = 0; m < 3; ++m) {
      INFO("member " << m << (no < 0 ? ", every member fine: it applies its own slice to its own shard once"
                                     : ", member 1 not fine: nobody applies anything"));
      CHECK(said[std::size_t(m)] == (no < 0 ? "true" : "false"));
      const Replica before = shard_of(m);
      const std::vector<float> g = slice_of(m);
      for (std::size_t i = 0; i < g.size(); ++i) {
        const float v = no < 0 ? 0.9f * before.momentum[i] + g[i] : before.momentum[i];
        CHECK(after[std::size_t(m)].momentum[i] == v);
        CHECK(after[std::size_t(m)].params[i] == (no < 0 ? before.params[i] - 0.5f * v : before.params[i]));
      }
    }
  }
}

namespace {

// A run under `policy` that must pass: exit 0, no ✘, every verdict of the policy and the commit probe's ✔.
void require_zero16_passes(const dpt_test::ProgramResult& run, const std::string& policy, const std::string& recovery) {
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_FALSE(zero16_has(run.output, "✘"));
  for (const std::string& v : kZeroVerdicts) CHECK(zero16_has(run.output, "✔ [" + policy + "] " + v));
  CHECK(zero16_has(run.output, "✔ [" + policy + "] " + recovery));
  for (const std::string& v : kZeroCommitProbe) CHECK(zero16_has(run.output, v));
}

}  // namespace

TEST_CASE("zero: a crash under --shard-recovery checkpoint goes back to the last sealed one, every verdict ✔", "[ch16]") {
  require_zero16_passes(run_zero16("--shard-recovery checkpoint --fail 2@7 --checkpoint-every 3"), "checkpoint",
                        "recovery at step 8: back to the last sealed checkpoint");
}

TEST_CASE("zero: a crash under --shard-recovery buddy loses nothing, every verdict ✔", "[ch16]") {
  const auto run = run_zero16("--shard-recovery buddy --fail 0@5 --fail 3@9");
  require_zero16_passes(run, "buddy", "recovery at step 6: nothing lost");
  INFO(run.output);
  CHECK(zero16_has(run.output, "✔ [buddy] rank 1's buddy copy: bytes = 4·ceil(Ψ/n)"));
  CHECK(zero16_has(run.output, "✔ [buddy] rank 1's last refresh sent the same bytes (traffic log)"));
}

TEST_CASE("zero: a planted buddy copy one step stale turns the momentum verdict ✘", "[ch16]") {
  const auto run = run_zero16("--shard-recovery buddy --fail 1@6 --shard-mistake stale-buddy");
  INFO(run.output);
  CHECK(run.exit_code == 3);
  CHECK(zero16_has(run.output, "✘ [buddy] momentum gathered from the shards = the replay's"));
}

TEST_CASE("zero: a planted re-cut one float late turns the momentum verdict ✘ under both policies", "[ch16]") {
  const auto run = run_zero16("--fail 1@6 --shard-mistake off-by-one");
  INFO(run.output);
  CHECK(run.exit_code == 3);
  CHECK(zero16_has(run.output, "✘ [checkpoint] momentum gathered from the shards = the replay's"));
  CHECK(zero16_has(run.output, "✘ [buddy] momentum gathered from the shards = the replay's"));
}

TEST_CASE("zero: plans a policy cannot survive, and its flags without --zero, exit 2 naming the flag", "[ch16]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--zero --ranks 4 --fail 1@3 --fail 2@3", "--fail"},
      {"--zero --ranks 4 --join 3@5 --fail 3@2", "--join"},
      {"--zero --ranks 4 --fail 1@3:freeze", "--fail"},
      {"--zero --ring", "--ring"},
      {"--zero --shard-recovery checkpoint --shard-mistake stale-buddy", "--shard-mistake"},
      {"--shard-recovery buddy", "--shard-recovery"},
      {"--zero --checkpoint-every 0", "--checkpoint-every"}};
  for (const auto& [args, flag] : bad) {
    const auto run = dpt_test::run_program("ch16_fault_tolerance", "--quiet --steps 8 " + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(zero16_has(run.output, flag));
  }
}
