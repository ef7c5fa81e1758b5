// test_launch_flags.cpp — the launch flags: parsed into LaunchOptions, and
// every bad value refused with a message naming the flag; a program (this
// binary, in a child process) exits 2 at parse time with one line.
#include <CLI/CLI.hpp>
#include "support/catch.h"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "dpt/launch.h"
#include "dpt/options.h"

namespace {

// Parses `args` (without the program name) with the launch flags.
void parse(dpt::LaunchOptions& o, std::vector<std::string> args) {
  CLI::App app{"test"};
  dpt::add_launch_flags(app, o);
  std::vector<const char*> argv = {"test"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(int(argv.size()), const_cast<char**>(argv.data()));
}

std::string parse_error(std::vector<std::string> args) {
  dpt::LaunchOptions o;
  try {
    parse(o, std::move(args));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ----------------------------------------------------------------------------
// flags

TEST_CASE("launch flags parse into LaunchOptions") {
  dpt::LaunchOptions o;
  parse(o, {"--ranks", "4", "--comm", "mpi", "--comm-timeout", "2.5", "--link", "pcie",
            "--link-gbps", "50", "--link-latency-us", "0.5", "--trace", "t.json",
            "--eager-limit", "1024"});
  CHECK(o.eager_limit_bytes == 1024);
  CHECK(o.ranks == 4);
  CHECK(o.ranks_given);
  CHECK(o.comm == "mpi");
  CHECK(o.timeout_s == 2.5);
  CHECK(o.link_preset == "pcie");
  CHECK(o.trace_path == "t.json");
  dpt::LinkModel link = dpt::effective_link(o);
  CHECK(link.gbps == 50);         // explicit flag overrides the preset's 200
  CHECK(link.latency_us == 0.5);  // and so does the latency
  dpt::LaunchOptions defaults;
  parse(defaults, {});
  CHECK_FALSE(defaults.ranks_given);
  CHECK(defaults.ranks == 1);
  CHECK(defaults.comm == "threads");
  CHECK(defaults.eager_limit_bytes == 65536);  // on by default: Open MPI's TCP eager limit
  CHECK_FALSE(dpt::effective_link(defaults).enabled());
}

TEST_CASE("launch flags reject --ranks 0 with a message naming the flag") {
  std::string message = parse_error({"--ranks", "0"});
  CHECK(message.find("--ranks") != std::string::npos);
  CHECK(message.find("positive integer") != std::string::npos);
}

// Runs in a child process started by the next test (hidden from normal runs
// by [.], and inert unless that test set DPT_TEST_CHILD): parses the flags in
// DPT_TEST_ARGS (space-separated) the way a chapter's main() does, which exits.
TEST_CASE("child: parse launch flags with parse_flags", "[.]") {
  const char* child = std::getenv("DPT_TEST_CHILD");
  if (!child || std::string(child) != "parse-launch-flags") return;
  CLI::App app{"prog"};
  dpt::LaunchOptions o;
  dpt::add_launch_flags(app, o);
  std::vector<std::string> args = {"prog"};
  std::string all = std::getenv("DPT_TEST_ARGS");
  for (std::size_t at = 0, space; at < all.size(); at = space + 1) {
    space = all.find(' ', at);
    if (space == std::string::npos) space = all.size();
    args.push_back(all.substr(at, space - at));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  dpt::parse_flags(app, int(argv.size()), argv.data());
  std::_Exit(0);  // not reached when a flag is rejected
}

namespace {
struct ChildResult {
  int exit_code = -1;
  std::string err;
};

// Runs the hidden case above in a fresh process (this test binary), since
// parse_flags exits. Its stderr comes back through a pipe.
ChildResult parse_in_child(const std::string& args) {
  int pipe_fds[2];
  ChildResult result;
  if (pipe(pipe_fds) != 0) return result;
  std::fflush(nullptr);  // or the child would print our buffered output again
  pid_t child = fork();
  if (child < 0) return result;
  if (child == 0) {
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);  // Catch's own report
    setenv("DPT_TEST_CHILD", "parse-launch-flags", 1);
    setenv("DPT_TEST_ARGS", args.c_str(), 1);
    execl("/proc/self/exe", "dpt_core_tests", "child: parse launch flags with parse_flags", nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  char buf[512];
  for (ssize_t got; (got = read(pipe_fds[0], buf, sizeof buf)) > 0;) result.err.append(buf, got);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}
}  // namespace

TEST_CASE("a program given --ranks 0 exits with code 2 and one line naming the flag") {
  ChildResult r = parse_in_child("--ranks 0");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("prog: --ranks: expects a positive integer, got '0'") == 0);
}

TEST_CASE("absurd rank counts and non-finite launch values exit 2 at parse time, without file:line") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--ranks 100000", "prog: --ranks: expects a rank count from 1 to 4096, got '100000'"},
      {"--ranks 99999999999999999999", "prog: --ranks:"},
      {"--comm-timeout inf", "prog: --comm-timeout: expects a finite positive number, got 'inf'"},
      {"--comm-timeout nan", "prog: --comm-timeout:"},
      {"--link-gbps inf", "prog: --link-gbps: expects a finite positive number, got 'inf'"},
      {"--link-latency-us inf", "prog: --link-latency-us: expects a finite non-negative number"},
      {"--eager-limit -1", "prog: --eager-limit: expects a byte count"},
      {"--eager-limit lots", "prog: --eager-limit:"},
  };
  for (const auto& [args, start] : cases) {
    ChildResult r = parse_in_child(args);
    INFO(args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(start) == 0);
    CHECK(r.err.find(".cpp:") == std::string::npos);
  }
  CHECK(parse_in_child("--ranks 4096 --comm mpi --comm-timeout 0.5 --eager-limit 0 --link-latency-us 0").exit_code == 0);
}

TEST_CASE("more than 256 rank threads exit 2 at parse time, saying why and pointing to mpirun") {
  // A ring's 2n(n-1) messages on one machine's cores: ch07 takes ~23 s a step
  // at 256 threads on 2 cores, and grew past 300 s at 1024.
  ChildResult r = parse_in_child("--ranks 257");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("prog: --ranks: 257 rank threads: at most 256 run in one process") == 0);
  CHECK(r.err.find("mpirun") != std::string::npos);
  CHECK(parse_in_child("--ranks 257 --comm threads").exit_code == 2);
  CHECK(parse_in_child("--ranks 256").exit_code == 0);
  CHECK(parse_in_child("--ranks 257 --comm mpi").exit_code == 0);  // processes: mpirun decides
}

TEST_CASE("bad --comm, --comm-timeout, --link and --link-gbps values are rejected") {
  CHECK(parse_error({"--comm", "nccl2"}).find("--comm") != std::string::npos);
  CHECK(parse_error({"--comm-timeout", "0"}).find("--comm-timeout") != std::string::npos);
  CHECK(parse_error({"--comm-timeout", "-1"}).find("--comm-timeout") != std::string::npos);
  CHECK(parse_error({"--link", "carrier-pigeon"}).find("--link") != std::string::npos);
  CHECK(parse_error({"--link-gbps", "0"}).find("--link-gbps") != std::string::npos);
  CHECK(parse_error({"--link-latency-us", "-3"}).find("--link-latency-us") != std::string::npos);
  CHECK(parse_error({"--ranks", "3"}).empty());
}
