// test_ch09.cpp — chapter 09: the server's apply_push, the worker's
// push_and_pull and the stale-synchronous bound (the holes), the provided
// arrival order, and the chapter program. Oracles share no code with the
// holes: SGD written out here on one device's gradient of the whole batch,
// the core's train_single_device, staleness counted here from the arrival
// order, the traffic log's bytes, and tables of cases argued in place.
//
// Here: apply_push and push_and_pull; ssp_must_wait in test_ch09_ssp.cpp, the
// arrival order and the chapter's program in test_ch09_chapter.cpp; the
// threads-world runner in support/ch09_world.h.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "ch09.h"
#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "parameter_server.h"
#include "support/ch09_world.h"

using namespace dpt;
using namespace dpt::ch09;
using dpt_test::rounds;
using dpt_test::run_ps;
using dpt_test::shuffled_rounds;
using dpt_test::small_options;
using dpt_test::World;

namespace {
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

TEST_CASE("apply_push: a sync round closes when all W pushes are in, whatever their order", "[ch09]") {
  // apply_push alone, as the server loop calls it, on rounds whose pushes
  // come in shuffled orders (the last is not always worker W−1's). Oracle:
  // SGD with the mean of the round's gradients, written out here.
  for (int W : {3, 4}) {
    const std::vector<int> order = W == 3 ? std::vector<int>{2, 0, 1, 1, 2, 0, 0, 1, 2, 2, 1, 0}
                                          : std::vector<int>{3, 1, 0, 2, 1, 3, 2, 0, 0, 1, 2, 3};
    const int n = 5;
    ServerShard shard;
    shard.mode = Mode::Sync;
    shard.workers = W;
    shard.lr = 0.5f;
    shard.params = {1.0f, -2.0f, 0.5f, 4.0f, 3.0f};
    shard.scratch.assign(n, 0.0f);
    shard.read_version.assign(std::size_t(W), 0);
    std::vector<double> expected(shard.params.begin(), shard.params.end()), mean(n, 0.0);
    for (std::size_t p = 0; p < order.size(); ++p) {
      const std::size_t r = p / std::size_t(W), j = p % std::size_t(W);
      const int w = order[p];
      std::vector<float> grad(n);
      for (int i = 0; i < n; ++i) grad[std::size_t(i)] = 0.25f * float((w + 1) * (i + 1)) - 0.125f * float(r);
      for (int i = 0; i < n; ++i) mean[std::size_t(i)] += double(grad[std::size_t(i)]) / W;
      std::string round;
      for (std::size_t k = 0; k < std::size_t(W); ++k) round += (k ? ", " : "") + std::to_string(order[r * W + k]);
      const std::string where = "sync, " + std::to_string(W) + " workers, round " + std::to_string(r) +
                                " (pushes from workers " + round + ", in that order)";
      const std::vector<float> before = shard.params;
      const int64_t version = shard.version;
      const bool applied = apply_push(shard, w, grad.data());
      const bool last = j + 1 == std::size_t(W);
      std::string to_come;
      for (std::size_t k = j + 1; k < std::size_t(W); ++k)
        to_come += (k > j + 1 ? ", " : "") + std::to_string(order[r * W + k]);
      if (applied && !last)
        FAIL(where << ": apply_push returned true on push " << j + 1 << " of " << W << " (worker " << w << "'s), "
             "with worker(s) " << to_come << " still to come. A sync round closes when all W pushes are in, "
             "whatever their order: the last push of a round can be any worker's.");
      if (!applied && last)
        FAIL(where << ": apply_push returned false on the round's last push (worker " << w << "'s): all " << W
             << " pushes are in, so the round closes here, whatever their order.");
      if (!last) {
        INFO(where << ", push " << j + 1 << " of " << W << " (worker " << w << "'s): before the round is complete, "
             "neither params nor version may change");
        REQUIRE(shard.params == before);
        REQUIRE(shard.version == version);
        continue;
      }
      for (int i = 0; i < n; ++i) {
        expected[std::size_t(i)] -= 0.5 * mean[std::size_t(i)];
        mean[std::size_t(i)] = 0;
      }
      for (int i = 0; i < n; ++i) {
        const double step = expected[std::size_t(i)] - double(before[std::size_t(i)]);
        const double theirs = double(shard.params[std::size_t(i)]) - double(before[std::size_t(i)]);
        if (std::fabs(theirs - step) <= 1e-5 * std::max(1.0, std::fabs(step))) continue;
        FAIL(where << ", element " << i << ": the round's step is " << theirs << ", SGD with the mean of the round's "
             << W << " gradients is " << step << (std::fabs(theirs - W * step) < 1e-4 * std::fabs(W * step)
             ? " (" + std::to_string(W) + " times as large: the gradients were summed, not averaged)" : "")
             << ". One device's step on the W batches as one uses the mean of their gradients.");
      }
      INFO(where << ": one update per round, so version counts the rounds closed");
      REQUIRE(shard.version == int64_t(r) + 1);
      for (int64_t& read : shard.read_version) read = shard.version;  // the loop answers every worker
    }
    INFO("sync: every gradient is applied to the parameters it was computed on: one staleness entry of 0 per push");
    CHECK(shard.staleness == std::vector<int64_t>(order.size(), 0));
  }
}

TEST_CASE("apply_push: sync servers take one device's SGD step on all workers' batches, step by step",
          "[ch09][needs:push_and_pull]") {
  dpt_test::require_push_and_pull();  // the part it runs through, first
  for (auto [servers, workers] : {std::pair{1, 3}, std::pair{2, 2}, std::pair{3, 4}}) {
    const int steps = 5;
    Options o = small_options(steps);
    Dataset data = load_dataset(o);
    PsConfig c = ps_config(Mode::Sync, servers, shuffled_rounds(workers, steps));  // rounds in any order
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
             "device's SGD step on the " << workers << " workers' batches as one by " << off << "× its size (the "
             "servers' step is " << ratio << " times as large"
             << (std::fabs(ratio - workers) < 0.05 * workers ? ": the W gradients were summed, not averaged" : "")
             << (ratio < 1e-9 ? ": nothing was applied" : "") << "). A sync server must wait for every worker's "
             "push, then take one SGD step with the gradient of their samples together.");
      }
    }
  }
}

TEST_CASE("apply_push: async with one worker is plain SGD", "[ch09][needs:push_and_pull]") {
  dpt_test::require_push_and_pull();  // the part it runs through, first
  for (int servers : {1, 2}) {
    const int steps = 12;
    Options o = small_options(steps);
    Dataset data = load_dataset(o);
    World world = run_ps(servers, 1, ps_config(Mode::Async, servers, rounds(1, steps)), o);
    MLP plain = train_single_device(o, data, o.batch);  // the core's SGD, one device
    double off = max_abs_difference(world.ranks[0].params, flatten(plain.parameters()));
    if (!(off <= 1e-6))  // said only when the parameters are off, not beside a staleness failure
      FAIL_CHECK(servers << " server(s), one worker, " << steps << " async pushes: the servers' parameters differ "
                 "from plain SGD's by " << off << ". With one worker every push is computed on the newest "
                 "parameters, and each must be one SGD step with that gradient: lr times it, no more, no less.");
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
  dpt_test::require_push_and_pull();  // the part it runs through, first
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
  World synced = run_ps(2, 3, ps_config(Mode::Sync, 2, shuffled_rounds(3, 3)), o);
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

TEST_CASE("push_and_pull: server s receives exactly grad[shard(s)], and params[shard(s)] is server s's answer",
          "[ch09]") {
  // The servers here are the test's own: each receives every worker's push,
  // then answers each with values that name server, worker and element. The
  // gradient's values name worker and element too, so a slice taken from the
  // wrong place cannot pass for the right one.
  const int servers = 3, workers = 2;
  const Roles roles{servers, workers, 601};  // shards of 201, 200, 200
  auto grad_value = [](int w, int64_t i) { return float(100000 * (w + 1) + i); };
  auto answer_value = [](int s, int w, int64_t i) { return -float(1000000 * (s + 1) + 100000 * w + i); };
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> received(servers, std::vector<std::vector<float>>(workers));
  std::vector<std::vector<float>> pulled(workers);
  dpt_test::run_ranks(servers + workers, [&](Context& ctx) {
    if (ctx.rank < servers) {
      const int s = ctx.rank;
      const Range r = roles.shard(s);
      std::vector<std::vector<float>> got(workers, std::vector<float>(std::size_t(r.size())));
      for (int w = 0; w < workers; ++w) ctx.comm.recv(got[w].data(), r.size(), roles.worker_rank(w), kPushTag);
      for (int w = 0; w < workers; ++w) {
        std::vector<float> answer(std::size_t(r.size()));
        for (int64_t i = 0; i < r.size(); ++i) answer[std::size_t(i)] = answer_value(s, w, r.begin + i);
        ctx.comm.send(answer.data(), r.size(), roles.worker_rank(w), kPullTag);
      }
      std::lock_guard<std::mutex> lock(mutex);
      received[std::size_t(s)] = got;
      return;
    }
    const int w = ctx.rank - servers;
    std::vector<float> grad(std::size_t(roles.count)), params(std::size_t(roles.count), 0.0f);
    for (int64_t i = 0; i < roles.count; ++i) grad[std::size_t(i)] = grad_value(w, i);
    push_and_pull(ctx.comm, roles, grad, params);
    std::lock_guard<std::mutex> lock(mutex);
    pulled[std::size_t(w)] = params;
  }, 5);
  for (int s = 0; s < servers; ++s) {
    const Range r = roles.shard(s);
    for (int w = 0; w < workers; ++w)
      for (int64_t i = 0; i < r.size(); ++i) {
        const float got = received[std::size_t(s)][std::size_t(w)][std::size_t(i)];
        if (got == grad_value(w, r.begin + i)) continue;
        FAIL("server " << s << " (shard [" << r.begin << ", " << r.end << ")) got from worker " << w
             << " a push whose element " << i << " is the gradient's element " << int64_t(got) % 100000
             << ", not " << r.begin + i << ": server s must receive exactly grad[shard(s).begin … shard(s).end), "
             "the slice at its shard's offset");
      }
  }
  for (int w = 0; w < workers; ++w)
    for (int s = 0; s < servers; ++s) {
      const Range r = roles.shard(s);
      for (int64_t i = r.begin; i < r.end; ++i) {
        if (pulled[std::size_t(w)][std::size_t(i)] == answer_value(s, w, i)) continue;
        FAIL("worker " << w << "'s params[" << i << "] is " << pulled[std::size_t(w)][std::size_t(i)]
             << ", but server " << s << " (whose shard holds it) answered " << answer_value(s, w, i)
             << ": params[shard(s)] must be exactly server s's answer, in place");
      }
    }
  SUCCEED("every server got its own slice, and every worker holds every server's answer where it belongs");
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
