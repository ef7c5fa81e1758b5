// test_ch04_chapter.cpp — chapter 04's program, ch04_ring_allreduce: its
// verdicts, training with the ring like one device (threads and real mpirun),
// 500k floats under mpirun without deadlock, and flags that differ between
// ranks.
#include "support/catch.h"
#include <string>

#include "dpt/comm.h"
#include "support/run_program.h"
#include "support/single_device.h"

using namespace dpt;

namespace {
// The chapter's own demos (explain, check, timing) shrunk to a minimum.
const char* kQuickDemos = "--no-explain --max-bytes 4096 --reps 1 --check-size 100";
}  // namespace

TEST_CASE("chapter: ch04's verdicts pass and say what the traffic log shows", "[ch04]") {
  auto run = dpt_test::run_program("ch04_ring_allreduce", std::string("--ranks 3 ") + kQuickDemos + " " +
                                                              dpt_test::small_problem(8));
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("one all-reduce: each rank sends only to its right neighbour") != std::string::npos);
  CHECK(run.output.find("training: each rank sends only to its right neighbour") != std::string::npos);
  CHECK(run.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch04 trains with the ring and matches one device", "[ch04]") {
  dpt_test::check_matches_single_device("ch04_ring_allreduce", 3, false, kQuickDemos);
}

TEST_CASE("chapter: under mpirun, the ring trains 2 and 4 processes like one device", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) dpt_test::check_matches_single_device("ch04_ring_allreduce", np, true, kQuickDemos);
}

TEST_CASE("chapter: under mpirun, the ring sums 500k floats on 2 and 4 processes (no send/recv deadlock)",
          "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  // 2 MB messages: far above Open MPI's eager limit (64 KiB on shared
  // memory), so a blocking send before the recv waits for a peer that is
  // itself blocked in send; the 5 s timeout turns that hang into a failure.
  for (int np : {2, 4}) {
    INFO("mpirun -np " << np);
    auto run = dpt_test::run_mpi("ch04_ring_allreduce", np,
                                 "--comm mpi --comm-timeout 5 --no-explain --max-bytes 4096 --reps 1 "
                                 "--check-size 500000 --no-verify --steps 1 --quiet --model 32-16-4 --samples 256");
    INFO(dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("chapter: ring replicas start from the master copy (--load-weights)", "[ch04]") {
  dpt_test::check_matches_single_device("ch04_ring_allreduce", 3, false, kQuickDemos,
                                       dpt_test::load_master_weights_flag(7));
}

TEST_CASE("chapter: under mpirun, ranks started with different ch04 flags stop naming the flag", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // A rank timing other sizes (or drawing while the other does not) would
  // wait in a collective its peer never calls: the timeout is 20 s, the
  // agreement check must answer at once, naming the flag.
  const std::string program = dpt_test::program_path("ch04_ring_allreduce") +
                              " --comm mpi --comm-timeout 20 --quiet --no-verify --steps 1 --model 32-16-4 --samples 64 "
                              "--reps 1 ";
  const std::string rank0 = "--max-bytes 4096 --check-size 100";
  // Rank 1 differs from rank 0 in one flag: {its flags, the flag's name}.
  for (auto differs : {std::make_pair("--max-bytes 32768 --check-size 100", "--max-bytes"),
                       std::make_pair("--max-bytes 4096 --check-size 101", "--check-size"),
                       std::make_pair("--max-bytes 4096 --check-size 100 --no-explain", "--explain")}) {
    auto run = dpt_test::run_mpmd(program + rank0, program + differs.first);
    INFO(differs.first << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.output, contains_text(differs.second) && contains_text("every rank needs the same flags"));
  }
}

TEST_CASE("chapter: under mpirun, ranks with and without --quiet still draw the ring together", "[ch04][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  if (std::string why = dpt_test::mpmd_problem(); !why.empty()) DPT_SKIP(why);  // the machine's mpirun
  // --quiet may differ between ranks (rank 0 alone talks); the drawing is
  // collective, so a quiet rank must still take part in it.
  const std::string program = dpt_test::program_path("ch04_ring_allreduce") +
                              " --comm mpi --comm-timeout 20 --no-verify --steps 1 --model 32-16-4 --samples 64 "
                              "--check-size 100 --reps 1 --max-bytes 4096";
  auto run = dpt_test::run_mpmd(program, program + " --quiet");
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("scatter-reduce step 1/1"));
}
