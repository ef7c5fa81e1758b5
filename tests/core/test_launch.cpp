// test_launch.cpp — launch flags, launcher detection, and what each rank gets.
#include <CLI/CLI.hpp>
#include <algorithm>
#include "support/catch.h"
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "dpt/gpu.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "support/run_program.h"

using dpt::Context;

namespace {

const char* const kLauncherVariables[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                          "PMI_RANK",             "PMI_SIZE",
                                          "SLURM_PROCID",         "SLURM_NTASKS",
                                          "RANK",                 "WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                          "LOCAL_RANK"};

// Clears every launcher variable for the test's duration, then restores them.
class CleanEnvironment {
 public:
  CleanEnvironment() {
    for (const char* name : kLauncherVariables) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
  }
  ~CleanEnvironment() {
    for (const char* name : kLauncherVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

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
// which launcher started us

TEST_CASE("no launcher variables means a single process") {
  CleanEnvironment env;
  dpt::ProcessEnvironment p = dpt::detect_process_environment();
  CHECK_FALSE(p.under_launcher);
  CHECK(p.rank == 0);
  CHECK(p.world == 1);
  CHECK(p.source.empty());
}

TEST_CASE("each launcher's variables are detected, Open MPI's first") {
  CleanEnvironment env;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  auto p = dpt::detect_process_environment();
  CHECK(p.under_launcher);
  CHECK(p.rank == 1);
  CHECK(p.world == 2);
  CHECK(p.source == "RANK/WORLD_SIZE");

  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "8", 1);
  p = dpt::detect_process_environment();
  CHECK((p.rank == 3 && p.world == 8 && p.source == "SLURM_PROCID/SLURM_NTASKS"));

  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "4", 1);
  p = dpt::detect_process_environment();
  CHECK((p.rank == 0 && p.world == 4 && p.source == "PMI_RANK/PMI_SIZE"));

  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
  p = dpt::detect_process_environment();
  CHECK((p.rank == 5 && p.world == 6 && p.source == "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"));
}

TEST_CASE("the local rank (which picks the GPU) comes from the launcher, else the rank") {
  CleanEnvironment env;
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  CHECK(dpt::detect_process_environment().local_rank == 5);  // one node: local = global
  setenv("LOCAL_RANK", "1", 1);
  CHECK(dpt::detect_process_environment().local_rank == 1);
  setenv("SLURM_LOCALID", "2", 1);
  CHECK(dpt::detect_process_environment().local_rank == 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);  // Open MPI's wins
  CHECK(dpt::detect_process_environment().local_rank == 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  CHECK_THROWS_WITH(dpt::detect_process_environment(), contains_text("OMPI_COMM_WORLD_LOCAL_RANK='x'"));
}

TEST_CASE("half a variable pair is ignored") {
  CleanEnvironment env;
  setenv("RANK", "1", 1);  // no WORLD_SIZE: e.g. an unrelated RANK in the shell
  CHECK_FALSE(dpt::detect_process_environment().under_launcher);
}

TEST_CASE("malformed launcher variables are errors naming the variable") {
  CleanEnvironment env;
  setenv("RANK", "one", 1);
  setenv("WORLD_SIZE", "2", 1);
  CHECK_THROWS_WITH(dpt::detect_process_environment(), contains_text("RANK='one'"));
  setenv("RANK", "2", 1);  // rank must be below the count
  CHECK_THROWS_WITH(dpt::detect_process_environment(), contains_text("rank 2 of 2"));
}

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

// ----------------------------------------------------------------------------
// launch

TEST_CASE("launch runs fn once per rank, each with its rank, device and error label") {
  CleanEnvironment env;
  dpt::LaunchOptions o;
  o.ranks = 3;
  std::mutex mutex;
  std::vector<int> calls(3, 0), device(3, -1), label(3, -2), world(3, 0), root(3, -1), agree(3, 0);
  dpt::launch(o, [&](Context& ctx) {
    // Record only: Catch2 assertions are not thread-safe.
    std::lock_guard<std::mutex> lock(mutex);
    calls[ctx.rank] += 1;
    device[ctx.rank] = ctx.device.index();
    label[ctx.rank] = dpt::error_rank();
    world[ctx.rank] = ctx.world;
    root[ctx.rank] = ctx.is_root();
    agree[ctx.rank] = &ctx.device == &dpt::Device::cpu(ctx.rank) && ctx.comm.rank() == ctx.rank &&
                      ctx.comm.size() == 3 && ctx.comm.backend() == "threads" &&
                      ctx.trace.rank() == ctx.rank && ctx.options.ranks == 3;
  });
  CHECK(agree == std::vector<int>{1, 1, 1});
  CHECK(calls == std::vector<int>{1, 1, 1});
  CHECK(device == std::vector<int>{0, 1, 2});
  CHECK(label == std::vector<int>{0, 1, 2});
  CHECK(world == std::vector<int>{3, 3, 3});
  CHECK(root == std::vector<int>{1, 0, 0});
}

TEST_CASE("launch refuses --comm threads when a launcher started several processes") {
  CleanEnvironment env;
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  dpt::LaunchOptions o;
  o.ranks = 2;
  bool ran = false;
  CHECK_THROWS_WITH(dpt::launch(o, [&](Context&) { ran = true; }), contains_text("--comm mpi"));
  CHECK_FALSE(ran);
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);  // mpirun -np 1: threads inside it are fine
  CHECK_NOTHROW(dpt::launch(o, [](Context&) {}));
}

TEST_CASE("launch rejects bad options set in code with a sentence naming the flag") {
  dpt::LaunchOptions o;
  o.ranks = 0;
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--ranks"));
  o.ranks = 2;
  o.comm = "carrier-pigeon";
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--comm"));
  o.comm = "threads";
  o.timeout_s = 0;
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--comm-timeout"));
  o.timeout_s = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--comm-timeout"));
  o.timeout_s = 1;
  o.eager_limit_bytes = -1;
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--eager-limit"));
  o.eager_limit_bytes = 0;
  o.link.gbps = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--link-gbps"));
}

TEST_CASE("launch with --comm mpi in a build without MPI says how to get it") {
  if (dpt::mpi_available()) return;  // covered by tests/mpi in MPI builds
  dpt::LaunchOptions o;
  o.comm = "mpi";
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("built without MPI"));
}

TEST_CASE("async work a failed rank queued still reads a live Context while launch drains it", "[launch]") {
  // A rank queues work that reads its Context, then throws before waiting for
  // it; launch() drains the queue after the error. The Context must outlive
  // that drain (under ASan, reading it after its scope is a report).
  std::mutex mutex;
  std::vector<int> ranks_seen;
  dpt::LaunchOptions options;
  options.ranks = 2;
  options.timeout_s = 10;
  REQUIRE_THROWS_WITH(dpt::launch(options, [&](dpt::Context& ctx) {
    ctx.comm.async([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // still queued when the rank throws
      std::lock_guard<std::mutex> lock(mutex);
      ranks_seen.push_back(ctx.rank);
    });
    throw dpt::Error("rank " + std::to_string(ctx.rank) + " stops with work in flight");
  }), contains_text("stops with work in flight"));
  std::sort(ranks_seen.begin(), ranks_seen.end());
  CHECK(ranks_seen == std::vector<int>{0, 1});
}
