// test_ch16_chapter.cpp — ch16_fault_tolerance end to end on 4 rank threads:
// a crash, a join, a bit flip and a freeze each end with every verdict ✔
// (the "done when", threads part); the broken transaction turns the
// replay verdict ✘; bad plans exit 2 naming the flag.
#include "support/catch.h"

#include <string>

#include "support/run_program.h"

namespace {

const char* const kSmall = " --quiet --steps 16 --samples 128 ";

dpt_test::ProgramResult run_ch16(const std::string& args) {
  return dpt_test::run_program("ch16_fault_tolerance", "--ranks 4" + std::string(kSmall) + args);
}

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

void require_all_pass(const dpt_test::ProgramResult& run, const std::vector<std::string>& verdicts) {
  INFO("why: " << dpt_test::summary_line(run.output));  // the first ✘ (often a hole's probe), then the whole output
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_FALSE(has(run.output, "✘"));
  for (const std::string& v : verdicts) CHECK(has(run.output, "✔ " + v));
}

const std::vector<std::string> kCore = {"the run finished on the plan's ranks", "replicas identical",
                                        "a quorum's id is never taken for another quorum's",
                                        "the run = one device replaying the ledger",
                                        "the ledger consumed every sample of every epoch exactly once",
                                        "a quorum is as large as it can be", "nothing committed is lost",
                                        "each committed step consumed the policy's global batch"};

std::vector<std::string> with(std::vector<std::string> v, const std::vector<std::string>& more) {
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

}  // namespace

TEST_CASE("chapter: a crash shrinks the run to 3 ranks, every verdict passes", "[ch16]") {
  require_all_pass(run_ch16("--fail 2@5"), kCore);
}

TEST_CASE("chapter: a crash under --keep per-rank, every verdict passes", "[ch16]") {
  require_all_pass(run_ch16("--fail 1@4 --keep per-rank"), kCore);
}

TEST_CASE("chapter: a join heals from a peer: the bytes of a heal alone, the peer's weights, once", "[ch16]") {
  require_all_pass(run_ch16("--fail 3@3 --join 3@8"),
                   with(kCore, {"heal of rank 3 at step 8: the bytes of the same heal alone", "heal of rank 3 at step 8: max |w_joiner",
                                "a rank heals once each time it comes back"}));
  require_all_pass(run_ch16("--join 0@6"), with(kCore, {"heal of rank 0 at step 6: the bytes of the same heal alone"}));  // a spare
}

TEST_CASE("chapter: a bit flip is found by the checksums, the rank named, the run rolled back", "[ch16]") {
  require_all_pass(run_ch16("--fail 1@5:bitflip --check-every 4"),
                   with(kCore, {"the bit flip of --fail 1@5:bitflip found by a checksum, rank 1 named"}));
}

TEST_CASE("chapter: a bit flip met by a join: found before the heal spreads it, every verdict passes", "[ch16]") {
  // The flip is on rank 0, the heal's source, between two checks; rank 3 joins at the next one.
  require_all_pass(run_ch16("--fail 0@5:bitflip --fail 3@2 --join 3@6 --check-every 4"),
                   with(kCore, {"the bit flip of --fail 0@5:bitflip found by a checksum, rank 0 named",
                                "heal of rank 3 at step 6: max |w_joiner"}));
  require_all_pass(run_ch16("--fail 1@5:bitflip --fail 3@2 --join 3@6 --check-every 4"),
                   with(kCore, {"the bit flip of --fail 1@5:bitflip found by a checksum, rank 1 named"}));
}

TEST_CASE("chapter: a frozen rank is left out after the bounded wait, every verdict passes", "[ch16]") {
  require_all_pass(run_ch16("--fail 2@4:freeze --detect-timeout 0.5"), kCore);
}

TEST_CASE("chapter: a slow rank slows the run but it finishes, every verdict passes", "[ch16]") {
  require_all_pass(run_ch16("--fail 0@2:slow:3"), kCore);
}

TEST_CASE("chapter: the bare run plans a crash and a join, and its verdicts pass", "[ch16]") {
  auto run = dpt_test::run_program("ch16_fault_tolerance", "");
  INFO(run.output);
  CHECK(has(run.output, "planned: --fail 3@6"));
  CHECK(has(run.output, "planned: --join 3@12"));
  require_all_pass(run, with(kCore, {"heal of rank 3 at step 12: the bytes of the same heal alone"}));
}

TEST_CASE("chapter: a crash in the ring's last hop, announced to nobody, every verdict passes", "[ch16]") {
  require_all_pass(run_ch16("--ring --fail 1@5 --detect-timeout 0.5"),
                   with(kCore, {"replicas parted only where a bit flip was planned"}));
}

TEST_CASE("chapter: a half-done ring with the step applied before the vote parts the replicas: ✘", "[ch16]") {
  auto run = run_ch16("--ring --fail 3@5 --apply-before-vote --detect-timeout 0.5");
  INFO(run.output);
  CHECK(run.exit_code == 3);
  CHECK(has(run.output, "✘ replicas parted only where a bit flip was planned"));
}

TEST_CASE("chapter: a step applied before the vote is caught by the replay verdict", "[ch16]") {
  auto run = run_ch16("--fail 2@5 --apply-before-vote");
  INFO(run.output);
  CHECK(run.exit_code == 3);
  CHECK(has(run.output, "✘ the run = one device replaying the ledger"));
}

TEST_CASE("chapter: bad --fail and --join values exit 2 naming the flag", "[ch16]") {
  for (const char* bad : {"--fail 9@2", "--fail 1@99", "--fail x", "--fail 1@2:melt", "--join 1@3 --join 1@5",
                          "--fail 1@2 --fail 1@4", "--fail 0@1 --fail 1@1 --fail 2@1 --fail 3@1",
                          "--fail 1@5:bitflip --fail 1@6 --check-every 4"}) {
    auto run = run_ch16(bad);
    INFO(bad << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK((has(run.output, "--fail") || has(run.output, "--join")));
    CHECK(dpt_test::lines_in(run.output) <= 2);
  }
  auto mpi = run_ch16("--optimizer adam");
  CHECK(mpi.exit_code == 2);
  CHECK(has(mpi.output, "--optimizer"));
}
