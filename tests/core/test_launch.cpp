// test_launch.cpp — launcher detection, and what each rank gets from launch.
// The launch flags are in test_launch_flags.cpp.
#include "support/catch.h"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dpt/launch.h"

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
