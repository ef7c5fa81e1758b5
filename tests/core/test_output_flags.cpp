// test_output_flags.cpp — every file a chapter program writes, on the real
// binaries: each output flag (found in the program's --help, where
// add_output shows it as "FILE") is refused at parse time on the path of
// --load-weights or of another output, in one line with exit 2, and the input
// is untouched; a run whose last output cannot be written, or that is
// interrupted halfway, leaves every target as it was and no temporary file.
// Parse-time refusals take milliseconds, so the table runs every pair.
#include "support/catch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/folder.h"
#include "support/run_program.h"

using dpt_test::Folder;
using dpt_test::read_file;
using dpt_test::write_file;

namespace {
// Every chapter program, with the flags a parse needs to get as far as the
// path check (ch13 refuses a world that is not --stages x --dp first; ch02's
// sweep flags are refused without --batch-sweep).
const std::vector<std::pair<std::string, std::string>> kPrograms = {
    {"ch01_sgd", ""},
    {"ch02_batching", "--batch-sweep "},
    {"ch03_naive_dp", ""},
    {"ch04_ring_allreduce", ""},
    {"ch05_bucketing", ""},
    {"ch06_averaging", ""},
    {"ch07_zero", ""},
    {"ch08_collectives", ""},
    {"ch09_parameter_server", ""},
    {"ch10_compression", ""},
    {"ch11_mixed_precision", ""},
    {"ch12_tensor_parallel", ""},
    {"ch13_pipeline_parallel", "--ranks 4 "},
    {"ch14_language_model", ""},
    {"ch15_3d_parallel", ""},
    {"ch16_fault_tolerance", "--goodput "}};

// The outputs each program must offer beyond the common ones: the check below
// that the --help scan finds them keeps the scan honest.
const std::map<std::string, std::vector<std::string>> kChapterOutputs = {
    {"ch07_zero", {"--report-json"}},          {"ch08_collectives", {"--plot"}},
    {"ch09_parameter_server", {"--plot"}},     {"ch10_compression", {"--plot"}},
    {"ch13_pipeline_parallel", {"--gantt", "--gantt-trace"}}, {"ch02_batching", {"--sweep-plot"}},
    {"ch14_language_model", {"--plot"}},       {"ch15_3d_parallel", {"--plot", "--gantt"}},
    {"ch16_fault_tolerance", {"--plot"}}};

// Programs that launch no ranks (ch11's --ranks sizes a section's threads), so have no --trace.
const std::set<std::string> kOneProcessWithoutTrace = {"ch01_sgd", "ch02_batching", "ch11_mixed_precision"};

// The flags whose value --help shows as FILE: every add_output of the program.
std::vector<std::string> output_flags(const std::string& program) {
  auto run = dpt_test::run_program(program, "--help");
  REQUIRE(run.exit_code == 0);
  std::vector<std::string> flags;
  std::istringstream lines(run.output);
  const std::regex output_line(R"(^\s*(--[a-z0-9-]+) FILE(\s|$))");
  std::smatch m;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, m, output_line)) flags.push_back(m[1]);
  return flags;
}

using dpt_test::lines_in;
}  // namespace

TEST_CASE("outputs: every program's output flags are found, the chapter's own among them", "[output][cli]") {
  for (const auto& [program, extra] : kPrograms) {
    std::vector<std::string> flags = output_flags(program);
    std::set<std::string> found(flags.begin(), flags.end());
    std::vector<std::string> expected = {"--save-weights", "--save-data", "--metrics"};
    if (!kOneProcessWithoutTrace.count(program)) expected.push_back("--trace");  // launched ranks have a timeline
    if (kChapterOutputs.count(program))
      for (const std::string& f : kChapterOutputs.at(program)) expected.push_back(f);
    INFO(program);
    for (const std::string& f : expected) CHECK(found.count(f) == 1);
  }
}

TEST_CASE("outputs: each output on the path of --load-weights is refused in one line, the weights untouched",
          "[output][cli]") {
  Folder dir("outputs_vs_input");
  const std::string weights = dir / "w.safetensors";
  write_file(weights, "the weights a student trained for an hour");
  for (const auto& [program, extra] : kPrograms)
    for (const std::string& flag : output_flags(program)) {
      auto run = dpt_test::run_program(program, extra + "--load-weights " + weights + " " + flag + " " + weights);
      INFO(program << " " << flag << ": " << run.output);
      CHECK(run.exit_code == 2);
      CHECK(lines_in(run.output) == 1);
      CHECK(run.output.find(flag + " '" + weights + "' is the same file as --load-weights") != std::string::npos);
      CHECK(read_file(weights) == "the weights a student trained for an hour");
    }
}

TEST_CASE("outputs: two outputs on one path are refused in one line, and nothing is written", "[output][cli]") {
  Folder dir("outputs_vs_output");
  const std::string same = dir / "y";
  for (const auto& [program, extra] : kPrograms) {
    std::vector<std::string> flags = output_flags(program);
    for (std::size_t i = 0; i < flags.size(); ++i) {  // each flag against the next: every flag in two pairs
      const std::string& a = flags[i];
      const std::string& b = flags[(i + 1) % flags.size()];
      auto run = dpt_test::run_program(program, extra + a + " " + same + " " + b + " " + same);
      INFO(program << " " << a << " " << b << ": " << run.output);
      CHECK(run.exit_code == 2);
      CHECK(lines_in(run.output) == 1);
      CHECK(run.output.find("name the same file") != std::string::npos);
      CHECK(dir.entries().empty());
    }
  }
}

// ----------------------------------------------------------------------------
// all or nothing, at the end

TEST_CASE("outputs: a last output that cannot be written leaves the others absent or as they were", "[output]") {
  Folder dir("outputs_full_device");
  write_file(dir / "gantt.svg", "an old chart");
  auto run = dpt_test::run_program("ch13_pipeline_parallel",
                                   "--ranks 4 --quiet --steps 2 --samples 256 --eval-samples 64 --gantt " +
                                       (dir / "gantt.svg") + " --gantt-trace " + (dir / "gantt.json") + " --metrics " +
                                       (dir / "m.jsonl") + " --trace " + (dir / "t.json") + " --save-weights /dev/full");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("'/dev/full'") != std::string::npos);
  CHECK(dir.entries() == std::vector<std::string>{"gantt.svg"});
  CHECK(read_file(dir / "gantt.svg") == "an old chart");
}

TEST_CASE("outputs: SIGINT halfway leaves no output and no temporary file, an old one as it was", "[output]") {
  Folder dir("outputs_sigint");
  write_file(dir / "gantt.svg", "an old chart");
  std::vector<std::string> args = {dpt_test::program_path("ch13_pipeline_parallel"),
                                   "--ranks", "4", "--quiet", "--steps", "100000",
                                   "--gantt", dir / "gantt.svg", "--gantt-trace", dir / "gantt.json",
                                   "--metrics", dir / "m.jsonl", "--save-weights", dir / "w.safetensors"};
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // Catch2 (and a shell's background job) may ignore SIGINT: the program starts from the default
    ::signal(SIGINT, SIG_DFL);
    std::freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Halfway: once the charts (written before training) wait beside their targets.
  auto waiting = [&] {
    for (const std::string& name : dir.entries())
      if (name.find(".tmp.") != std::string::npos) return true;
    return false;
  };
  auto start = std::chrono::steady_clock::now();
  while (!waiting() && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool was_waiting = waiting();
  ::kill(child, SIGINT);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(was_waiting);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT));
  CHECK(dir.entries() == std::vector<std::string>{"gantt.svg"});
  CHECK(read_file(dir / "gantt.svg") == "an old chart");
}
