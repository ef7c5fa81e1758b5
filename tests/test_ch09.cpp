// test_ch09.cpp — chapter 09: the server's apply_push, the worker's
// push_and_pull and the stale-synchronous bound (the holes), the provided
// arrival order, and the chapter program. Oracles share no code with the
// holes: SGD written out here on one device's gradient of the whole batch,
// the core's train_single_device, staleness counted here from the arrival
// order, the traffic log's bytes, and tables of cases argued in place.
#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "ch09.h"
#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "parameter_server.h"
#include "support/ranks.h"
#include "support/run_program.h"

using namespace dpt;
using namespace dpt::ch09;

namespace {
// ----------------------------------------------------------------------------
// a small problem, and running the parameter server on a threads world

Options small_options(int64_t steps, float lr = 0.1f) {
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.parse(std::string("--quiet --model 32-16-4 --samples 256 --batch 8 --steps ") + std::to_string(steps));  // Ψ = 596
  o.lr = lr;
  return o;
}

struct World {
  std::vector<PsRun> ranks;  // each rank's view
};

// Runs the parameter server on servers + workers rank threads (rendezvous
// sends: any order that only buffering saves deadlocks here).
World run_ps(int servers, int workers, PsConfig c, const Options& o, double timeout_s = 5) {
  World out;
  out.ranks.resize(std::size_t(servers + workers));
  Dataset data = load_dataset(o);
  std::mutex mutex;
  c.servers = servers;
  try {
    dpt_test::run_ranks(servers + workers, [&](Context& ctx) {
      PsRun run = run_parameter_server(ctx, o, data, c);
      std::lock_guard<std::mutex> lock(mutex);
      out.ranks[std::size_t(ctx.rank)] = std::move(run);
    }, timeout_s);
  } catch (const Timeout& e) {
    FAIL(servers << " server(s), " << workers << " worker(s), " << mode_name(c.mode) << ": the ranks deadlocked. A "
         "server answers a worker only after that worker's push has arrived (in sync, after the whole round's), and "
         "serves workers in its own order: a worker that waits for parameters before it has pushed to every server "
         "can wait forever. The timeout said: " << e.what());
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    if (std::string(e.what()).find("(tag 91)") == std::string::npos) throw;  // not a push
    FAIL(servers << " server(s), " << workers << " worker(s): a push did not match what its server receives: "
         << e.what() << "\nServer s holds only its shard (roles.shard(s)) and receives exactly that slice of the "
         "gradient, once per step: not the whole gradient, not another server's slice.");
  }
  return out;
}

std::vector<int> rounds(int workers, int steps) {
  std::vector<int> order;
  for (int k = 0; k < steps; ++k)
    for (int w = 0; w < workers; ++w) order.push_back(w);
  return order;
}

// One device's gradient of the whole global batch of `step` at weights w:
// the core's forward/backward on the host, nothing of the chapter's.
std::vector<float> one_device_gradient(const Options& o, const Dataset& data, const std::vector<float>& w,
                                       int64_t global_batch, int64_t step) {
  MLP model = build_model(o, Device::host());
  std::vector<Tensor> params = model.parameters();
  unflatten(w, params);
  BatchSampler sampler(data.size(), global_batch, !o.no_shuffle, o.seed);
  Batch batch = gather_batch(data, sampler.indices(step), Device::host());
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  std::vector<Tensor> grads;
  for (Tensor& p : params) grads.push_back(p.grad());
  return flatten(grads);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}
}  // namespace

// ----------------------------------------------------------------------------
// apply_push

TEST_CASE("apply_push: sync servers take one device's SGD step on all workers' batches, step by step",
          "[ch09][needs:push_and_pull]") {
  for (auto [servers, workers] : {std::pair{1, 3}, std::pair{2, 2}, std::pair{3, 4}}) {
    const int steps = 5;
    Options o = small_options(steps);
    Dataset data = load_dataset(o);
    PsConfig c = ps_config(Mode::Sync, servers, rounds(workers, steps));
    c.keep_pulled = true;
    World world = run_ps(servers, workers, c, o);
    const auto& pulled = world.ranks[std::size_t(servers)].pulled;  // the first worker: w_0, w_1, …
    REQUIRE(pulled.size() == std::size_t(steps + 1));
    std::vector<float> start = flatten(build_model(o, Device::host()).parameters());
    {
      INFO("the workers' first parameters must be the model the flags ask for, as the servers hold it");
      REQUIRE(max_abs_difference(pulled[0], start) == 0);
    }
    for (int k = 0; k < steps; ++k) {
      // The oracle: w_k+1 = w_k − lr · g, g one device's gradient of the W·B samples at w_k.
      std::vector<float> g = one_device_gradient(o, data, pulled[std::size_t(k)], o.batch * workers, k);
      std::vector<float> ours(g.size()), theirs(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) {
        ours[i] = o.lr * g[i];
        theirs[i] = pulled[std::size_t(k)][i] - pulled[std::size_t(k + 1)][i];
      }
      double off = max_abs_difference(ours, theirs) / max_abs(ours);
      if (!(off <= 1e-4)) {
        double ratio = max_abs(theirs) / max_abs(ours);
        FAIL(servers << " server(s), " << workers << " workers, step " << k << ": the servers' step differs from one "
             "device's SGD step on the " << workers << " workers' batches as one by " << off << " of its size (the "
             "servers' step is " << ratio << " times as large"
             << (std::fabs(ratio - workers) < 0.05 * workers ? ": the W gradients were summed, not averaged" : "")
             << (ratio < 1e-9 ? ": nothing was applied" : "") << "). A sync server must wait for every worker's "
             "push, then take one SGD step with the gradient of their samples together.");
      }
    }
  }
}

TEST_CASE("apply_push: async with one worker is plain SGD", "[ch09][needs:push_and_pull]") {
  for (int servers : {1, 2}) {
    const int steps = 12;
    Options o = small_options(steps);
    Dataset data = load_dataset(o);
    World world = run_ps(servers, 1, ps_config(Mode::Async, servers, rounds(1, steps)), o);
    MLP plain = train_single_device(o, data, o.batch);  // the core's SGD, one device
    double off = max_abs_difference(world.ranks[0].params, flatten(plain.parameters()));
    INFO(servers << " server(s), one worker, " << steps << " async pushes: the servers' parameters differ from plain "
         "SGD's by " << off << ". With one worker every push is computed on the newest parameters, and each must be "
         "one SGD step with that gradient: lr times it, no more, no less.");
    CHECK(off <= 1e-6);
    for (int s = 0; s < servers; ++s) {
      INFO("server " << s << ": with one worker nothing else updates the shard between its pull and its push, so "
           "every staleness entry is 0, one per push");
      CHECK(world.ranks[std::size_t(s)].staleness == std::vector<int64_t>(std::size_t(steps), 0));
      CHECK(world.ranks[std::size_t(s)].version == steps);
    }
  }
}

TEST_CASE("apply_push: on a fixed arrival order every push's staleness is what the order implies",
          "[ch09][needs:push_and_pull]") {
  // Three workers, an order with a straggler (worker 2) and a burst (worker 0).
  const std::vector<int> order = {0, 1, 0, 0, 2, 1, 0, 1, 2, 0};
  // Counted by hand: push i of worker w was computed on the shard as the
  // server sent it after w's previous push j (version j + 1), or the start (0);
  // it is applied at version i: staleness i − (j + 1), or i for a first push.
  const std::vector<int64_t> expected = {0, 1, 1, 0, 4, 3, 2, 1, 3, 2};
  Options o = small_options(4, 0.01f);
  for (int servers : {1, 2}) {
    World world = run_ps(servers, 3, ps_config(Mode::Async, servers, order), o);
    for (int s = 0; s < servers; ++s) {
      const auto& seen = world.ranks[std::size_t(s)].staleness;
      INFO("server " << s << " recorded " << seen.size() << " staleness entries for " << order.size()
           << " pushes: one per push");
      REQUIRE(seen.size() == order.size());
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (seen[i] == expected[i]) continue;
        FAIL("server " << s << ", push " << i << " (worker " << order[i] << "): staleness " << seen[i] << ", the "
             "order implies " << expected[i] << " — the updates this shard received after it sent worker " << order[i]
             << " the parameters its gradient was computed on, before applying this one"
             << (seen[i] == expected[i] + 1 ? " (one too many: the update this push makes is not one it missed)"
                 : seen[i] + 1 == expected[i] ? " (one too few)" : ""));
      }
      INFO("server " << s << ": version counts the updates applied, one per async push");
      CHECK(world.ranks[std::size_t(s)].version == int64_t(order.size()));
    }
  }
  World synced = run_ps(2, 3, ps_config(Mode::Sync, 2, rounds(3, 3)), o);
  INFO("sync: every gradient is applied to the parameters it was computed on: 9 entries of 0; 3 updates");
  CHECK(synced.ranks[0].staleness == std::vector<int64_t>(9, 0));
  CHECK(synced.ranks[1].version == 3);
}

// ----------------------------------------------------------------------------
// push_and_pull

TEST_CASE("push_and_pull: each server gets its own slice, W x its shard in bytes per step",
          "[ch09][needs:apply_push]") {
  const int servers = 3, workers = 2, steps = 4;
  Options o = small_options(steps);
  const int64_t psi = build_model(o, Device::host()).num_parameters();  // 596 = 199 + 199 + 198
  World world;
  try {
    world = run_ps(servers, workers, ps_config(Mode::Sync, servers, rounds(workers, steps)), o);
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    FAIL("3 servers, 2 workers: the run failed: " << e.what() << "\nServer s holds only its shard (roles.shard(s)) "
         "and receives exactly that slice of the gradient: a push of the whole gradient, or of another slice's "
         "length, does not match what it receives.");
  }
  const auto m = world.ranks[0].traffic.matrix();
  const int64_t shards[] = {199, 199, 198};
  int64_t in_all = 0;
  for (int s = 0; s < servers; ++s)
    for (int w = 0; w < workers; ++w) {
      int64_t in = m[std::size_t(servers + w)][std::size_t(s)], out = m[std::size_t(s)][std::size_t(servers + w)];
      in_all += in;
      INFO("server " << s << " (" << shards[s] << " floats) and worker " << w << ", " << steps << " steps: the worker "
           "pushed " << in << " bytes and pulled " << out << "; its slice is " << 4 * shards[s] << " bytes, once per "
           "step each way (plus the start, pulled before step 0)");
      CHECK(in == steps * 4 * shards[s]);
      CHECK(out == (steps + 1) * 4 * shards[s]);
    }
  INFO("all servers together receive W·Ψ per step: " << workers * 4 * psi << " bytes");
  CHECK(in_all == steps * workers * 4 * psi);
  for (int a = 0; a < servers + workers; ++a)
    for (int b = 0; b < servers + workers; ++b)
      if ((a < servers) == (b < servers) && m[std::size_t(a)][std::size_t(b)] > 0)
        FAIL("rank " << a << " sent to rank " << b << ": workers talk to servers only, and servers to workers");
}

TEST_CASE("push_and_pull: async pushes and pulls without deadlock on any arrival order", "[ch09][needs:apply_push]") {
  Options o = small_options(4, 0.01f);
  for (const std::vector<int>& order : {std::vector<int>{2, 2, 2, 0, 1, 0}, std::vector<int>{1, 0, 2, 1, 0, 2}}) {
    World world = run_ps(2, 3, ps_config(Mode::Async, 2, order), o);
    INFO("each worker takes as many steps as the order has pushes of it");
    CHECK(world.ranks[2].steps == std::count(order.begin(), order.end(), 0));
    CHECK(world.ranks[4].steps == std::count(order.begin(), order.end(), 2));
  }
}

// ----------------------------------------------------------------------------
// ssp_must_wait

TEST_CASE("ssp_must_wait: waits exactly when starting would put it more than s steps ahead of the slowest",
          "[ch09]") {
  struct Case {
    std::vector<int64_t> completed;
    int worker, s;
    bool wait;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{0, 0}, 0, 0, false, "s = 0, nobody has finished: step 0 may start"},
      {{1, 0}, 0, 0, true, "s = 0: worker 0 finished step 0, worker 1 has not; lockstep waits"},
      {{1, 0}, 1, 0, false, "the slowest worker never waits"},
      {{1, 1}, 0, 0, false, "s = 0: everyone finished step 0, step 1 may start"},
      {{2, 0, 1}, 0, 1, true, "s = 1: starting step 2 with the slowest at 0 done is two ahead"},
      {{1, 0, 1}, 0, 1, false, "s = 1: starting step 1 with the slowest at 0 done is one ahead: allowed"},
      {{3, 1, 5}, 0, 2, false, "s = 2: 3 done vs the slowest's 1: two ahead, allowed"},
      {{3, 1, 5}, 2, 2, true, "s = 2: 5 done vs the slowest's 1: four ahead"},
      {{4, 1, 5}, 0, 2, true, "s = 2: 4 done vs 1: three ahead"},
      {{7, 7, 7}, 1, 0, false, "all level"},
      {{9, 2}, 0, 7, false, "s = 7: seven ahead, allowed"},
      {{10, 2}, 0, 7, true, "s = 7: eight ahead"}};
  for (const Case& c : cases) {
    bool got = ssp_must_wait(c.completed, c.worker, c.s);
    std::string done;
    for (int64_t x : c.completed) done += (done.empty() ? "" : ", ") + std::to_string(x);
    INFO("steps finished {" << done << "}, worker " << c.worker << ", max staleness " << c.s << ": must wait? "
         << (got ? "yes" : "no") << ", expected " << (c.wait ? "yes" : "no") << " — " << c.why);
    CHECK(got == c.wait);
  }
}

TEST_CASE("ssp_must_wait: with a straggler the fastest finishes at most s + 1 steps ahead, and gets there",
          "[ch09]") {
  for (int s : {0, 1, 2, 3}) {
    std::vector<int> order;
    try {
      order = arrival_order(Mode::Ssp, {1, 1, 4}, 60, s);  // worker 2 takes 4 times as long
    } catch (const NotImplemented&) {
      throw;
    } catch (const Error& e) {
      FAIL("max staleness " << s << ": " << e.what());
    }
    std::vector<int64_t> completed(3, 0);
    int64_t lead = 0;
    for (int w : order) {
      ++completed[std::size_t(w)];
      lead = std::max(lead, *std::max_element(completed.begin(), completed.end()) -
                                *std::min_element(completed.begin(), completed.end()));
    }
    INFO("max staleness " << s << ", a worker 4x slower: the fastest finished up to " << lead << " steps more than "
         "the slowest. It may start a step while at most s ahead, and finishing it takes it to s + 1 = " << s + 1
         << ": no more (the bound), and no less (no waiting the bound does not require)");
    CHECK(lead == s + 1);
  }
}

// ----------------------------------------------------------------------------
// the provided arrival order and the chapter program

TEST_CASE("chapter: arrival orders are sync rounds, and async by finishing time", "[ch09]") {
  CHECK(arrival_order(Mode::Sync, {1, 1, 3}, 7) == std::vector<int>{0, 1, 2, 0, 1, 2});  // two rounds of 3
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
  try {
    run_ps(1, 2, c, o, 10);
    FAIL("the run ended although worker 1 threw");
  } catch (const Timeout& e) {
    FAIL("a rank timed out instead of stopping when worker 1 failed: " << e.what());
  } catch (const Error& e) {
    INFO("launch reports the failing rank's own error: " << e.what());
    CHECK(std::string(e.what()).find("worker 1 gave up at step 2") != std::string::npos);
  }
}

TEST_CASE("chapter: a server that throws is reported, and no worker hangs", "[ch09][needs:apply_push]"
          "[needs:push_and_pull]") {
  Options o = small_options(6);
  PsConfig c = ps_config(Mode::Async, 2, rounds(3, 6));
  c.before_apply = [](int server, int64_t push) {
    if (server == 1 && push == 4) throw Error("server 1 lost its shard at push 4");
  };
  std::string error;
  try {
    run_ps(2, 3, c, o, 10);
  } catch (const Timeout& e) {
    error = std::string("timeout: ") + e.what();
  } catch (const Error& e) {
    error = e.what();
  }
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
  std::string error;
  try {
    dpt_test::run_ranks(3, [&](Context& ctx) {
      try {
        run_parameter_server(ctx, o, data, c);
      } catch (...) {
        release = true;  // the others gave up: let the frozen server go so the world can end
        throw;
      }
    }, 0.5);
  } catch (const Error& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("a worker waiting on a frozen server must give up after --comm-timeout (0.5 s here), saying on whom it "
       "waited; it said, after " << seconds << " s: " << error);
  CHECK(error.find("rank") != std::string::npos);
  CHECK(seconds < 4.0);
}

TEST_CASE("chapter: ch09 --ranks 5 --servers 1 passes every verdict",
          "[ch09][needs:apply_push][needs:push_and_pull][needs:ssp_must_wait]") {
  auto r = dpt_test::run_program("ch09_parameter_server", "--ranks 5 --servers 1 --steps 40 --eval-samples 500");
  INFO(dpt_test::summary_line(r.output));
  REQUIRE(r.exit_code == 0);
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
