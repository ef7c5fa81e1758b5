// test_child_says.cpp — support/child_says.h: what a child test process says
// reaches its parent whole, on one line, whatever Catch2 does to its report.
//
// The hidden case below fails with a sentence longer than Catch2's 80
// columns that quotes a "host name" of a length the parent picks, as the NCCL
// refusal quotes the real one (tests/gpu/test_gpu_comm.cpp); Catch2's report
// of it breaks at a place that moves with that length. The parent reads the
// child's own line, also with the report's colour forced on (as Catch2 3
// colours it under mpirun, whose ranks write to a terminal).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/catch.h"
#include "support/child_says.h"
#include "support/run_program.h"

namespace {

std::string sentence_naming(const std::string& host) {
  return "ranks 0 and 1 both got GPU 0000:00:06.0 on host " + host +
         ": NCCL needs one GPU per rank; run -np <= number of GPUs, or use --comm threads for several ranks "
         "on one GPU";
}

std::string self_path() {
  char path[PATH_MAX] = {};
  ssize_t got = readlink("/proc/self/exe", path, sizeof path - 1);
  return got > 0 ? std::string(path, std::size_t(got)) : "dpt_core_tests";
}

#if DPT_CATCH2_MAJOR >= 3
const char* const kCatchColourOn = "--colour-mode ansi";
#else
const char* const kCatchColourOn = "--use-colour yes";
#endif

}  // namespace

// Runs in a child process started by the test below (hidden by [.]; inert
// unless DPT_TEST_CHILD says so): fails with the sentence, its host name
// DPT_TEST_HOST_LENGTH letters long, split over two lines of its own.
TEST_CASE("child: fail with a long sentence naming a host", "[.]") {
  const char* child = std::getenv("DPT_TEST_CHILD");
  if (!child || std::string(child) != "long-sentence") return;
  std::string host(std::size_t(std::atoi(std::getenv("DPT_TEST_HOST_LENGTH"))), 'h');
  dpt_test::say_failure("test child failed: ", [&] {
    throw std::runtime_error("[rank 1]\n" + sentence_naming(host));
  });
}

TEST_CASE("a child's error reaches its parent as one whole line, at any host name length, colour on or off") {
  for (int length : {1, 2, 9, 33, 64, 100}) {
    for (const char* colour : {dpt_test::kCatchNoColour, kCatchColourOn}) {
      dpt_test::ProgramResult run = dpt_test::run_command(
          "DPT_TEST_CHILD=long-sentence DPT_TEST_HOST_LENGTH=" + std::to_string(length) + " '" + self_path() +
          "' 'child: fail with a long sentence naming a host' " + colour);
      INFO("host name of " << length << " letters, " << colour << "; the child wrote:\n" << run.output);
      CHECK(run.exit_code != 0);  // say_failure rethrows: the child still fails
      std::vector<std::string> said = dpt_test::said_after(run.output, "test child failed: ");
      REQUIRE(said.size() == 1);
      CHECK(said[0] == "[rank 1] " + sentence_naming(std::string(std::size_t(length), 'h')));
    }
  }
}

TEST_CASE("said_after reads each line that holds the prefix, without a terminal's carriage return") {
  std::string output = "mpirun says hello\r\nnccl child failed: rank 0's sentence\r\n"
                       "\x1b[0mnccl child failed: rank 1's sentence\nthe end";
  std::vector<std::string> said = dpt_test::said_after(output, "nccl child failed: ");
  CHECK(said == std::vector<std::string>{"rank 0's sentence", "rank 1's sentence"});
  CHECK(dpt_test::said_after(output, "mpi child failed: ").empty());
}
