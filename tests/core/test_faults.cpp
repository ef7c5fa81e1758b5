// test_faults.cpp — faults that must end in a sentence, never a hang, a crash
// or a lost file (issue 23): values past what the clock and the simulated
// link can hold, error lines that must stay whole, outputs that must not
// overwrite inputs, checkpoint files that lie about their size. Tagged
// [faults]: `ctest -L faults` runs them (tests/mpi/CMakeLists.txt), with the
// mpirun fault tests (tests/mpi/faults/).
#include <CLI/CLI.hpp>
#include "support/catch.h"
#include "support/parse_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "dpt/check.h"
#include "dpt/comm.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/output_file.h"
#include "dpt/report.h"
#include "dpt/sharded_checkpoint.h"
#include "support/folder.h"  // read_file, write_file
#include "support/run_program.h"
#include "support/shard_oracle.h"

using dpt::Context;
using Clock = std::chrono::steady_clock;

namespace {

// The sentence CLI11 gives for `flag value` after add_launch_flags, or "" if accepted.
std::string launch_flag_error(const std::string& flag, const std::string& value) {
  CLI::App app("prog");
  dpt::LaunchOptions o;
  dpt::add_launch_flags(app, o);
  std::vector<std::string> args = {value, flag};  // CLI11 reads a vector back to front
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}


namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  std::string dir = dpt_test::temp_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
using dpt_test::read_file;
using dpt_test::write_file;
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The sentence parse_flags would print for `args` on a program with the
// common and launch flags, or "" if they are accepted.
std::string faults_parse_error(std::vector<std::string> args) {
  return dpt_test::parse_error_of(
      [](CLI::App& app) {
        static dpt::Options o;  // the child exits inside parse_flags: these outlive it
        static dpt::LaunchOptions l;
        dpt::add_common_flags(app, o);
        dpt::add_launch_flags(app, l);
      },
      std::move(args));
}

}  // namespace

// ----------------------------------------------------------------------------
// item 3: a timeout the clock cannot hold

TEST_CASE("comm timeout: values the clock cannot hold are refused, at parse time and in code", "[faults]") {
  // 1e10 s is 1e19 ns, past int64: the deadline wrapped into the past and the
  // first wait "timed out" at once, advising a larger value.
  std::string err = launch_flag_error("--comm-timeout", "1e10");
  INFO("--comm-timeout 1e10 -> '" << err << "'");
  CHECK(err.find("expects a number from 0.001 to 1e+06") != std::string::npos);
  CHECK(launch_flag_error("--comm-timeout", "1e6").empty());

  dpt::LaunchOptions o;
  o.ranks = 3;
  o.timeout_s = 1e10;
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--comm-timeout must be from"));
}

TEST_CASE("comm timeout: the largest allowed timeout waits for a late peer instead of failing", "[faults]") {
  dpt::LaunchOptions o;
  o.ranks = 3;
  o.timeout_s = dpt::kMaxCommTimeoutS;
  CHECK_NOTHROW(dpt::launch(o, [](Context& ctx) {
    float x = 1;
    if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ctx.comm.all_reduce(&x, 1, dpt::ReduceOp::Sum);
  }));
}

// ----------------------------------------------------------------------------
// item 9: the simulated link

TEST_CASE("simulated link: absurd latency and bandwidth are refused at parse time", "[faults]") {
  CHECK(launch_flag_error("--link-latency-us", "1e15").find("expects a number from 0 to 1e+06") != std::string::npos);
  CHECK(launch_flag_error("--link-gbps", "1e-9").find("expects a number from 0.001 to 1e+06") != std::string::npos);
  CHECK(launch_flag_error("--link-gbps", "0.001").empty());
  dpt::LaunchOptions o;
  o.ranks = 2;
  o.link.gbps = 1e-9;
  CHECK_THROWS_WITH(dpt::launch(o, [](Context&) {}), contains_text("--link-gbps must be 0 (none) or from"));
}

TEST_CASE("simulated link: a simulated wait longer than the timeout is a timeout, not a sleep", "[faults]") {
  // 4 MB at the slowest allowed 1 Mbit/s would take 32 s; the timeout is 1 s.
  dpt::LaunchOptions o;
  o.ranks = 2;
  o.timeout_s = 1;
  o.link.gbps = dpt::kMinLinkGbps;
  Clock::time_point start = Clock::now();
  CHECK_THROWS_WITH(dpt::launch(o,
                                [](Context& ctx) {
                                  std::vector<float> v(1 << 20);
                                  if (ctx.rank == 0) ctx.comm.send(v.data(), int64_t(v.size()), 1);
                                  else ctx.comm.recv(v.data(), int64_t(v.size()), 0);
                                }),
                    contains_text("on the simulated link, more than the --comm-timeout of 1.0 s"));
  double took = dpt::seconds_since(start);
  INFO("the run took " << took << " s; a simulated wait must not outlast --comm-timeout (1 s)");
  CHECK(took < 10);
}

// ----------------------------------------------------------------------------
// item 12: one error line is one write

TEST_CASE("error lines: run_guarded prints a failure as one write, so ranks' lines cannot interleave", "[faults]") {
  // A packet-mode pipe (O_DIRECT) hands each write(2) back as its own read:
  // the first read holds exactly what the first write wrote.
  int fds[2];
  REQUIRE(::pipe2(fds, O_DIRECT) == 0);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(fds[1], STDERR_FILENO);
  int code = dpt::run_guarded("prog", [] { DPT_FAIL("something went wrong on purpose"); });
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fds[1]);
  char buffer[4096];
  ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  std::string first(buffer, n > 0 ? std::size_t(n) : 0);
  INFO("the first write(2) to stderr was '" << first << "'");
  CHECK(code == 1);
  CHECK(first == "prog: error: something went wrong on purpose\n");
}

// ----------------------------------------------------------------------------
// item 4: metrics are a document, replaced only by a run that ends well

TEST_CASE("metrics: a run that fails keeps the old file, and one that ends well replaces it", "[faults]") {
  std::string dir = fresh_dir("faults_metrics"), path = dir + "/m.jsonl";
  write_file(path, "{\"step\": 0, \"loss\": 9}\n");
  try {
    dpt::MetricsWriter metrics(path);
    metrics.write(0, {{"loss", 1.0}});
    DPT_FAIL("the loss diverged");  // what a diverging run throws while its writer is open
  } catch (const dpt::Error&) {
  }
  INFO("entries: " << entries(dir).size());
  CHECK(read_file(path) == "{\"step\": 0, \"loss\": 9}\n");  // untouched
  CHECK(entries(dir) == std::vector<std::string>{"m.jsonl"});   // and no temporary file left
  {
    dpt::MetricsWriter metrics(path);
    metrics.write(0, {{"loss", 1.0}});
    CHECK(read_file(path) == "{\"step\": 0, \"loss\": 9}\n");  // still the old one while running
  }
  CHECK(read_file(path) == "{\"loss\":1.0,\"step\":0}\n");
  {
    dpt::MetricsWriter more(path, /*append=*/true);  // evaluate.cpp adds a line after training
    more.write(5, {{"accuracy", 0.5}});
  }
  CHECK(read_file(path) == "{\"loss\":1.0,\"step\":0}\n{\"accuracy\":0.5,\"step\":5}\n");
  fs::remove_all(dir);
}

// ----------------------------------------------------------------------------
// item 12: SIGINT and SIGTERM remove the temporary files

TEST_CASE("interrupted: SIGINT or SIGTERM while an output is written leaves no temporary file", "[faults]") {
  for (int sig : {SIGINT, SIGTERM}) {
    std::string dir = fresh_dir("faults_sigint"), path = dir + "/w.bin";
    write_file(path, "old");
    pid_t child = ::fork();
    if (child == 0) {  // Catch2 handles these signals itself: the child starts from the default
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      dpt::OutputFile out(path);
      out.write("half of the new bytes");
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    INFO("signal " << sig << "; the directory holds " << entries(dir).size() << " entries");
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig));  // still ends as the signal ends a process
    CHECK(entries(dir) == std::vector<std::string>{"w.bin"});
    CHECK(read_file(path) == "old");
    fs::remove_all(dir);
  }
}

// ----------------------------------------------------------------------------
// items 5 and 6: checkpoint files that lie about their size, a linked .partial

TEST_CASE("checkpoint: a shard larger than index.json recorded is refused before it is read", "[faults]") {
  std::string dir = fresh_dir("faults_big_shard");
  dpt_test::FullState s = dpt_test::tiny_state();
  for (int r = 0; r < 2; ++r) dpt::save_checkpoint_shard(dir, dpt_test::shard_of(s, r, 2, 4));
  dpt::finish_checkpoint(dir, dpt_test::shard_of(s, 0, 2, 4));
  std::string shard = dpt::checkpoint_step_dir(dir, 4) + "/shard-00001-of-00002.safetensors";
  fs::resize_file(shard, uint64_t(1) << 30);  // sparse: 1 GiB that reading whole would allocate
  Clock::time_point start = Clock::now();
  CHECK_THROWS_WITH(dpt::load_checkpoint_shard(dir, 1, 2),
                    contains_text("is 1073741824 bytes, more than a shard of 2 floats can hold (index.json recorded") &&
                        contains_text("not read"));
  INFO("refusing took " << dpt::seconds_since(start) << " s; reading 1 GiB first takes several");
  CHECK(dpt::seconds_since(start) < 1.0);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a step-N.partial that is a symbolic link is refused, and its target is untouched", "[faults]") {
  std::string dir = fresh_dir("faults_partial_link"), victim = fresh_dir("faults_victim");
  write_file(victim + "/precious", "keep me");
  write_file(victim + "/shard-00007-of-00009.safetensors", "not ours either");
  fs::create_directory_symlink(victim, dpt::checkpoint_step_dir(dir, 6) + ".partial");
  dpt_test::FullState s = dpt_test::tiny_state();
  CHECK_THROWS_WITH(dpt::save_checkpoint_shard(dir, dpt_test::shard_of(s, 0, 1, 6)), contains_text("symbolic link"));
  CHECK_THROWS_WITH(dpt::finish_checkpoint(dir, dpt_test::shard_of(s, 0, 1, 6)), contains_text("symbolic link"));
  CHECK(entries(victim) == std::vector<std::string>{"precious", "shard-00007-of-00009.safetensors"});
  CHECK(read_file(victim + "/precious") == "keep me");
  fs::remove_all(dir);
  fs::remove_all(victim);
}

// ----------------------------------------------------------------------------
// item 7: an output that is an input or another output

TEST_CASE("paths: an output that is an input or another output is refused before any work", "[faults]") {
  std::string dir = fresh_dir("faults_paths");
  write_file(dir + "/w.safetensors", "weights");
  std::string err = faults_parse_error({"--load-weights", dir + "/w.safetensors", "--save-weights", dir + "/w.safetensors"});
  CHECK_THAT(err, contains_text("--save-weights") && contains_text("is the same file as --load-weights"));
  err = faults_parse_error({"--metrics", dir + "/same.out", "--save-weights", dir + "/./same.out"});
  CHECK_THAT(err, contains_text("--save-weights") && contains_text("name the same file"));
  err = faults_parse_error({"--metrics", dir + "/same.out", "--trace", dir + "/same.out"});
  CHECK_THAT(err, contains_text("--trace") && contains_text("name the same file"));
  err = faults_parse_error({"--data", "mnist:" + dir, "--save-weights", dir + "/train-labels-idx1-ubyte"});
  CHECK_THAT(err, contains_text("lies inside --data"));
  CHECK(faults_parse_error({"--metrics", "/dev/null", "--trace", "/dev/null", "--save-weights", dir + "/new"}).empty());
  CHECK(read_file(dir + "/w.safetensors") == "weights");
  fs::remove_all(dir);
}

TEST_CASE("paths: consolidating a checkpoint onto one of its own shards is refused, the shard intact", "[faults]") {
  std::string dir = fresh_dir("faults_consolidate");
  dpt_test::FullState s = dpt_test::tiny_state();
  for (int r = 0; r < 2; ++r) dpt::save_checkpoint_shard(dir, dpt_test::shard_of(s, r, 2, 4));
  dpt::finish_checkpoint(dir, dpt_test::shard_of(s, 0, 2, 4));
  std::string shard = dpt::checkpoint_step_dir(dir, 4) + "/shard-00000-of-00002.safetensors";
  std::string before = read_file(shard);
  CHECK_THROWS_WITH(dpt::consolidate_checkpoint(dir, shard), contains_text("lies inside the checkpoint"));
  CHECK(read_file(shard) == before);
  CHECK_NOTHROW(dpt::load_checkpoint_shard(dir, 0, 2));
  fs::remove_all(dir);
}
