// test_ch09_chapter.cpp — chapter 09's provided arrival order, faults (a
// worker or server that throws or freezes is reported, nobody hangs), and the
// program, ch09_parameter_server, with threads and under mpirun.
#include "support/catch.h"
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ch09.h"
#include "dpt/comm.h"
#include "dpt/launch.h"
#include "parameter_server.h"
#include "ps_report.h"
#include "support/ch09_world.h"
#include "support/run_program.h"

using namespace dpt;
using namespace dpt::ch09;
using dpt_test::rounds;
using dpt_test::run_ps;
using dpt_test::small_options;

namespace {
// What a run that must fail said: its error ("timeout: …" for a Timeout, ""
// when it ended without one). An unwritten hole's NotImplemented passes
// through, as in every hole test.
std::string failure_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const NotImplemented&) {
    throw;
  } catch (const Timeout& e) {
    return std::string("timeout: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// ----------------------------------------------------------------------------
// the provided arrival order and the chapter program

TEST_CASE("chapter: arrival orders are sync rounds, and async by finishing time", "[ch09]") {
  // sync: one round per slowest step (3), each worker once, the straggler
  // (worker 2) last; the tie between workers 0 and 1 drawn from the seed, so
  // over rounds and seeds both orders come up.
  bool zero_first = false, one_first = false;
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    std::vector<int> order = arrival_order(Mode::Sync, {1, 1, 3}, 7, 0, seed);
    INFO("seed " << seed << ": two rounds of 3 pushes, each {0, 1} in some order, then the straggler, 2");
    REQUIRE(order.size() == 6);
    for (std::size_t r = 0; r < 6; r += 3) {
      CHECK(order[r + 2] == 2);
      CHECK(std::min(order[r], order[r + 1]) == 0);
      CHECK(std::max(order[r], order[r + 1]) == 1);
      (order[r] == 0 ? zero_first : one_first) = true;
    }
    CHECK(arrival_order(Mode::Sync, {1, 1, 3}, 7, 0, seed) == order);  // the same seed, the same order
  }
  INFO("ties in a sync round must not always be broken in worker order (nor always against it)");
  CHECK((zero_first && one_first));
  std::vector<int> even = arrival_order(Mode::Sync, {1, 1, 1, 1}, 50, 0, 42);
  int64_t last_not_three = 0;
  for (std::size_t r = 3; r < even.size(); r += 4) last_not_three += even[r] != 3;
  INFO("equal workers, 50 rounds: the last push of a round was not worker 3's in " << last_not_three);
  CHECK(last_not_three >= 25);
  // async: finishing at 1, 2, 3 (workers 0, 1) and 3 (worker 2); ties in worker order
  CHECK(arrival_order(Mode::Async, {1, 1, 3}, 3) == std::vector<int>{0, 1, 0, 1, 0, 1, 2});
  CHECK(arrival_makespan(Mode::Async, {1, 1, 3}, 3.5) == 3);
  CHECK(implied_staleness(Mode::Async, {0, 1, 0, 1, 0, 1, 2}) == std::vector<int64_t>{0, 1, 1, 1, 1, 1, 6});
}

TEST_CASE("chapter: a worker that throws is reported, and nobody hangs", "[ch09][needs:apply_push]"
          "[needs:push_and_pull]") {
  Options o = small_options(6);
  PsConfig c = ps_config(Mode::Sync, 1, rounds(2, 6));
  c.before_push = [](int worker, int64_t step) {
    if (worker == 1 && step == 2) throw Error("worker 1 gave up at step 2");
  };
  const std::string error = failure_of([&] { run_ps(1, 2, c, o, 10); });
  INFO("launch must stop every rank and report the failing rank's own error, not a timeout; it said: "
       << (error.empty() ? "nothing, the run ended although worker 1 threw" : error));
  CHECK(error.find("worker 1 gave up at step 2") != std::string::npos);
}

TEST_CASE("chapter: a server that throws is reported, and no worker hangs", "[ch09][needs:apply_push]"
          "[needs:push_and_pull]") {
  Options o = small_options(6);
  PsConfig c = ps_config(Mode::Async, 2, rounds(3, 6));
  c.before_apply = [](int server, int64_t push) {
    if (server == 1 && push == 4) throw Error("server 1 lost its shard at push 4");
  };
  const std::string error = failure_of([&] { run_ps(2, 3, c, o, 10); });
  INFO("launch must stop every rank and report the server's own error, not a timeout; it said: " << error);
  CHECK(error.find("server 1 lost its shard at push 4") != std::string::npos);
}

TEST_CASE("chapter: a server that freezes is reported within the timeout, naming a rank", "[ch09][needs:apply_push]"
          "[needs:push_and_pull]") {
  Options o = small_options(4);
  PsConfig c = ps_config(Mode::Sync, 1, rounds(2, 4));
  std::atomic<bool> release{false};
  c.before_apply = [&release](int, int64_t push) {  // server 0 stops answering after its second push
    if (push != 1) return;
    for (int i = 0; i < 400 && !release; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  Dataset data = load_dataset(o);
  auto started = std::chrono::steady_clock::now();
  const std::string error = failure_of([&] {
    dpt_test::run_ranks(3, [&](Context& ctx) {
      try {
        run_parameter_server(ctx, o, data, c);
      } catch (...) {
        release = true;  // the others gave up: let the frozen server go so the world can end
        throw;
      }
    }, 0.5);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("a worker waiting on a frozen server must give up after --comm-timeout (0.5 s here), saying on whom it "
       "waited; it said, after " << seconds << " s: " << error);
  CHECK(error.find("rank") != std::string::npos);
  CHECK(error.find("rank 0 is in no communication call, so it stopped (frozen)") != std::string::npos);
  CHECK(seconds < 4.0);
}

TEST_CASE("chapter: an error that stops the program on a worker rank makes it exit 1", "[ch09][needs:apply_push]"
          "[needs:push_and_pull]") {
  // main() ends in run_chapter -> run_lecture, as here: an error on any rank,
  // server 0 (rank 0, the one that reports) only waiting on it, must still
  // be the program's exit code, not rank 0's verdicts.
  Options o = small_options(6);
  Dataset data = load_dataset(o);
  LaunchOptions three;
  three.ranks = 3;
  three.timeout_s = 10;
  for (bool fails : {false, true}) {
    PsConfig c = ps_config(Mode::Sync, 1, rounds(2, 6));
    if (fails)
      c.before_push = [](int worker, int64_t step) {
        if (worker == 1 && step == 2) throw Error("worker 1 gave up at step 2");
      };
    std::exception_ptr hole;  // a hole not filled yet: fail with its NotImplemented, as every hole test does
    std::mutex mutex;
    int code = run_lecture("ch09_test", three, [&](Context& ctx) {
      try {
        run_parameter_server(ctx, o, data, c);
      } catch (const NotImplemented&) {
        std::lock_guard<std::mutex> lock(mutex);
        hole = std::current_exception();
        throw;
      }
      return 0;  // every verdict passed, as far as rank 0 knows
    });
    if (hole) std::rethrow_exception(hole);
    INFO((fails ? "worker 1 (rank 2) threw at step 2" : "nothing failed") << ": the program's exit code is " << code
         << "; 1 means an error stopped it (printed on stderr), 0 that it ran to the end and every verdict passed");
    CHECK(code == (fails ? 1 : 0));
  }
}

TEST_CASE("chapter: ch09 stopped by an error exits 1 and says why, under threads and mpirun", "[ch09]") {
  struct Case {
    const char* args;
    const char* says;
  };
  // The first stops in the lecture, the second inside the protocol (every
  // rank's run_parameter_server), before any hole is called.
  for (Case c : {Case{"--ranks 3 --servers 3", "leaves no worker"},
                 Case{"--ranks 8 --servers 7 --model 2-2 --steps 4", "more than the 6 parameters to shard"}}) {
    auto r = dpt_test::run_program("ch09_parameter_server", c.args);
    INFO("ch09_parameter_server " << c.args << " exited " << r.exit_code << " (1: an error stopped it); it said: "
         << dpt_test::summary_line(r.output));
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("error:") != std::string::npos);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
  if (!mpi_available()) return;
  auto r = dpt_test::run_mpi("ch09_parameter_server", 3, "--comm mpi --comm-timeout 20 --servers 3");
  INFO("mpirun -np 3 … --servers 3 exited " << r.exit_code << " (non-zero: a rank's error); it said: "
       << dpt_test::summary_line(r.output));
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("leaves no worker") != std::string::npos);
}

TEST_CASE("chapter: ch09 refuses an optimizer its servers do not run, in one line naming the flag", "[ch09]") {
  auto r = dpt_test::run_program("ch09_parameter_server", "--optimizer adam");
  INFO("ch09_parameter_server --optimizer adam exited " << r.exit_code << " (2: a bad flag); it said: " << r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--optimizer") != std::string::npos);
  CHECK(r.output.find("the servers run plain SGD") != std::string::npos);
}

TEST_CASE("chapter: ch09 with no --ranks runs 1 server and 4 workers and passes every verdict",
          "[ch09][needs:apply_push][needs:push_and_pull][needs:ssp_must_wait]") {
  auto r = dpt_test::run_program("ch09_parameter_server", "--steps 40 --eval-samples 500");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("1 server(s), 4 worker(s)") != std::string::npos);
  CHECK(r.output.find("cannot fail") == std::string::npos);
  CHECK(r.output.find("every push's staleness = what the arrival order implies") != std::string::npos);
  CHECK(r.output.find("\u2718") == std::string::npos);
}

TEST_CASE("chapter: ch09 --servers 2 --mode ssp --slow-rank 3 passes every verdict, quietly",
          "[ch09][needs:apply_push][needs:push_and_pull][needs:ssp_must_wait]") {
  auto r = dpt_test::run_program("ch09_parameter_server", "--ranks 5 --servers 2 --mode ssp --max-staleness 1 "
                                 "--slow-rank 3 --steps 40 --eval-samples 500 --quiet");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("ssp: steps the fastest worker finished beyond the slowest = max staleness + 1") != std::string::npos);
  CHECK(r.output.find("1. Who is who") == std::string::npos);  // --quiet: summary and verdicts only
}

TEST_CASE("chapter: under mpirun -np 3 and 5, ch09 passes every verdict",
          "[ch09][mpi][needs:apply_push][needs:push_and_pull][needs:ssp_must_wait]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (auto [np, args] : {std::pair{3, "--servers 1 --mode async"}, std::pair{5, "--servers 2 --slow-rank 4"}}) {
    auto r = dpt_test::run_mpi("ch09_parameter_server", np, std::string("--comm mpi --comm-timeout 20 --steps 30 "
                               "--eval-samples 500 ") + args);
    INFO("mpirun -np " << np << " " << args << ": " << dpt_test::summary_line(r.output));
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("each server moves W x its shard per step") != std::string::npos);
  }
}
