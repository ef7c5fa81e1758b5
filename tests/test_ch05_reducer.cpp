// test_ch05_reducer.cpp — chapter 05's mark_ready and wait_and_unpack: launch
// order and launch-when-complete against the test's own record while hooks
// fire in shuffled orders, the wait before the copy-back, and a parameter
// with no gradient (alone, and on two ranks: an error naming it, no hang).
#include "support/catch.h"
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ch05.h"
#include "support/ch05_ring_bucket.h"
#include "support/ch05_words.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch05;
using dpt_test::ring_bucket_state;
using dpt_test::listed;

// ----------------------------------------------------------------------------
// mark_ready

namespace {
// One step of mark_ready with hooks firing in `order` on a layout written by
// hand, against the test's own record. "" if every launch was right, else
// what went wrong first, in words.
std::string launch_problem(const std::vector<Bucket>& layout, int params, const std::vector<int>& order) {
  std::vector<bool> marked(std::size_t(params), false);
  std::vector<int> launched, fired;
  std::string problem;
  auto complete = [&](int b) {
    for (int p : layout[std::size_t(b)].params)
      if (!marked[std::size_t(p)]) return p;
    return -1;
  };
  auto hooks = [&] {
    return fired.size() == 1 ? "after the hook of parameter " + listed(fired)
                             : "after the hooks of parameters " + listed(fired) + " (in that order)";
  };
  BucketState state = make_bucket_state(layout, Device::host(), [&](int b) {
    if (!problem.empty()) return;
    if (b < 0 || b >= int(layout.size()))
      problem = hooks() + ", launch(" + std::to_string(b) + ") was called: there is no bucket " + std::to_string(b);
    else if (std::count(launched.begin(), launched.end(), b) > 0)
      problem = hooks() + ", bucket " + std::to_string(b) + " was launched a second time this step: each bucket is "
                "all-reduced once per step";
    else if (int p = complete(b); p >= 0)
      problem = hooks() + ", bucket " + std::to_string(b) + " was launched while its parameter " + std::to_string(p) +
                " was not ready: its all-reduce would send a gradient backward has not finished";
    else if (b != int(launched.size()))
      problem = hooks() + ", bucket " + std::to_string(b) + " was this rank's all-reduce number " +
                std::to_string(launched.size() + 1) + ": hooks fire in another order on another rank, where "
                "another bucket could be its number " + std::to_string(launched.size() + 1) +
                "; then the two ranks' rings would add up gradients of different parameters (or deadlock on "
                "different sizes)";
    launched.push_back(b);
  });
  for (int p : order) {
    marked[std::size_t(p)] = true;
    fired.push_back(p);
    mark_ready(state, p);
    if (!problem.empty()) return problem;
    // Oracle: after this hook no bucket the contract already let go still waits.
    std::size_t may = 0;
    while (may < layout.size() && complete(int(may)) < 0) ++may;
    if (launched.size() < may)
      return hooks() + ", buckets 0 to " + std::to_string(may - 1) + " were complete, but only " +
             std::to_string(launched.size()) + " bucket(s) had been launched: a bucket that may go must go at once, "
             "while backward goes on, or the overlap is lost";
  }
  return "";
}
}  // namespace

TEST_CASE("mark_ready: buckets launch in the same order whatever order hooks fire in, each as soon as it may",
          "[ch05][needs:mark_ready]") {
  // A layout written by hand (not assign_buckets: this test needs only mark_ready).
  std::vector<Bucket> layout = {{{5, 4}, 8}, {{3}, 4}, {{2, 1}, 8}, {{0}, 4}};
  std::mt19937 rng(11);
  std::vector<int> order = {5, 4, 3, 2, 1, 0};  // backward's own order first, then shuffled
  for (int trial = 0; trial < 300; ++trial) {
    std::string problem = launch_problem(layout, 6, order);
    if (!problem.empty()) FAIL(problem);
    std::shuffle(order.begin(), order.end(), rng);
  }
}

TEST_CASE("mark_ready: the state is per step, so a second step launches every bucket again",
          "[ch05][needs:mark_ready]") {
  int launches = 0;
  BucketState state = make_bucket_state({{{1}, 4}, {{0}, 4}}, Device::host(), [&](int) { ++launches; });
  for (int step = 0; step < 2; ++step) {
    reset_bucket_state(state);
    for (int p : {1, 0}) mark_ready(state, p);
  }
  if (launches != 4)
    FAIL("two steps of two buckets made " << launches << " launches, not 4: every bucket is all-reduced once in "
                                             "every step, and reset_bucket_state (which clears state.ready and "
                                             "state.launched) is all that starts a new step");
}

TEST_CASE("mark_ready: a parameter marked twice in one step, or one that does not exist, is an error naming it",
          "[ch05][needs:mark_ready]") {
  BucketState state = make_bucket_state({{{1, 0}, 8}}, Device::host(), [](int) {});
  mark_ready(state, 1);
  auto expect_error = [&](int param, const std::string& what) {
    try {
      mark_ready(state, param);
    } catch (const Error& e) {
      if (std::string(e.what()).find("#" + std::to_string(param)) == std::string::npos)
        FAIL_CHECK(what << " must be a dpt::Error naming parameter #" << param << "; it said: " << e.what());
      return;
    }
    FAIL_CHECK(what << " was accepted: it must be a dpt::Error naming parameter #" << param
                    << " (a hook that fires twice would count one gradient twice, or launch a bucket early)");
  };
  expect_error(1, "marking parameter #1 ready a second time in one step");
  expect_error(7, "marking parameter #7 of a 2-parameter model ready");
}

// ----------------------------------------------------------------------------
// wait_and_unpack

namespace {
// An all-reduce that ends 50 ms after its wait() starts, when `finished`
// becomes true and its bucket holds `values`.
struct SlowWork : Work {
  Tensor flat;
  std::vector<float> values;
  bool finished = false;
  SlowWork(Tensor f, std::vector<float> v) : flat(std::move(f)), values(std::move(v)) {}
  void wait() override {
    if (finished) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (std::size_t i = 0; i < values.size(); ++i) flat.data()[i] = values[i];
    finished = true;
  }
  bool done() override { return finished; }
};
}  // namespace

TEST_CASE("wait_and_unpack: waits for every bucket, then copies it back in fill order",
          "[ch05][needs:wait_and_unpack]") {
  // param 0 has 2 floats, 1 has 2, 2 has 1; bucket 0 = (param 2, param 1) = [10 | 11 12], bucket 1 = param 0 = [20 21]
  const std::vector<Bucket> layout = {{{2, 1}, 12}, {{0}, 8}};
  const std::vector<std::vector<float>> bucket_values = {{10, 11, 12}, {20, 21}};
  const std::vector<std::vector<float>> want = {{20, 21}, {11, 12}, {10}};
  const std::vector<std::string> names = {"a", "b", "c"};
  std::vector<std::shared_ptr<SlowWork>> works;
  BucketState state = make_bucket_state(layout, Device::host(), [](int) {});
  for (std::size_t b = 0; b < 2; ++b) {  // launched by hand: this test needs only wait_and_unpack
    works.push_back(std::make_shared<SlowWork>(state.flat[b], bucket_values[b]));
    state.work[b] = works[b];
    state.launched[b] = true;
  }
  std::fill(state.ready.begin(), state.ready.end(), true);
  std::vector<Tensor> grads = {Tensor::zeros({2}, Device::host()), Tensor::zeros({2}, Device::host()),
                               Tensor::zeros({1}, Device::host())};
  wait_and_unpack(state, grads, names);
  for (std::size_t b = 0; b < 2; ++b) {
    INFO("bucket " << b);
    if (!works[b]->finished) FAIL_CHECK("wait_and_unpack returned before bucket " + std::to_string(b) +
                                          "'s all-reduce finished: the optimizer would read unfinished sums");
  }
  for (std::size_t p = 0; p < 3; ++p) {
    std::vector<float> got = grads[p].to_vector();
    if (got == want[p]) continue;
    std::string at = p == 0 ? "bucket 1, floats 0..1" : p == 1 ? "bucket 0, floats 1..2" : "bucket 0, float 0";
    bool zeros = got == std::vector<float>(got.size(), 0.0f);
    FAIL_CHECK("parameter " << names[p] << " (#" << p << ") got [" << listed(got) << "], but its values are at " << at
                            << ", [" << listed(want[p]) << "]: bucket 0 holds parameters 2, 1 and bucket 1 parameter "
                            << "0, each in the bucket's fill order"
                            << (zeros ? " (still zeros: copied before its all-reduce had finished, or not at all)" : ""));
  }
}

TEST_CASE("wait_and_unpack: a parameter with no gradient is an error naming it and its bucket, after the launched "
          "buckets finished",
          "[ch05][needs:wait_and_unpack]") {
  // Bucket 0 (params 3, 2) launched; bucket 1 (params 1, 0) not: fc0.bias (#1) never became ready.
  BucketState state = make_bucket_state({{{3, 2}, 8}, {{1, 0}, 8}}, Device::host(), [](int) {});
  auto work = std::make_shared<SlowWork>(state.flat[0], std::vector<float>{1, 2});
  state.work[0] = work;
  state.launched[0] = true;
  for (int p : {3, 2, 0}) state.ready[std::size_t(p)] = true;
  std::vector<Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(Tensor::zeros({1}, Device::host()));
  try {
    wait_and_unpack(state, grads, {"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"});
    FAIL("wait_and_unpack returned although bucket 1 was never launched (parameter fc0.bias, #1, never became "
         "ready): that must be a dpt::Error naming the parameter and its bucket");
  } catch (const Error& e) {
    std::string message = e.what();
    INFO("its error: " << message);
    if (message.find("fc0.bias") == std::string::npos || message.find("bucket 1") == std::string::npos)
      FAIL_CHECK("the error must name the parameter that got no gradient (fc0.bias) and its bucket (bucket 1)");
    if (!work->finished) FAIL_CHECK("the error came before launched bucket 0's all-reduce had finished: it writes "
                                  "state.flat, and the other ranks' rings wait for this rank's part of it");
  }
}

TEST_CASE("wait_and_unpack: the error waits for a launched bucket that comes after the unlaunched one",
          "[ch05][needs:wait_and_unpack]") {
  // Bucket 0 (params 3, 2) not launched: fc1.weight (#2) never became ready. Bucket 1 (params 1, 0) launched,
  // by hand: a state no rule of mark_ready leaves, but the contract's "every bucket that did launch" is all of them.
  BucketState state = make_bucket_state({{{3, 2}, 8}, {{1, 0}, 8}}, Device::host(), [](int) {});
  auto work = std::make_shared<SlowWork>(state.flat[1], std::vector<float>{1, 2});
  state.work[1] = work;
  state.launched[1] = true;
  for (int p : {3, 1, 0}) state.ready[std::size_t(p)] = true;
  std::vector<Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(Tensor::zeros({1}, Device::host()));
  try {
    wait_and_unpack(state, grads, {"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"});
    FAIL("wait_and_unpack returned although bucket 0 was never launched (parameter fc1.weight, #2, never became "
         "ready): that must be a dpt::Error naming the parameter and its bucket");
  } catch (const Error& e) {
    std::string message = e.what();
    INFO("its error: " << message);
    if (message.find("fc1.weight") == std::string::npos || message.find("bucket 0") == std::string::npos)
      FAIL_CHECK("the error must name the parameter that got no gradient (fc1.weight) and its bucket (bucket 0)");
    if (!work->finished) FAIL_CHECK("the error came before launched bucket 1's all-reduce had finished: every "
                                  "bucket that launched, wherever it sits in the layout, still writes state.flat, "
                                  "and the other ranks' rings wait for this rank's part of it");
  }
}

TEST_CASE("wait_and_unpack: a bucket never launched though all its parameters were ready is an error",
          "[ch05][needs:wait_and_unpack]") {
  BucketState state = make_bucket_state({{{1}, 4}, {{0}, 4}}, Device::host(), [](int) {});
  std::fill(state.ready.begin(), state.ready.end(), true);  // a mark_ready that forgot to launch
  std::vector<Tensor> grads = {Tensor::zeros({1}, Device::host()), Tensor::zeros({1}, Device::host())};
  INFO("no bucket was launched: the first one must be named, whatever the parameters' flags say");
  CHECK_THROWS_WITH(wait_and_unpack(state, grads, {"w", "b"}), contains_text("bucket 0"));
}

TEST_CASE("wait_and_unpack: a parameter unused on one of two ranks fails fast with its name, no hang",
          "[ch05][needs:mark_ready][needs:wait_and_unpack][needs:ring_scatter_reduce][needs:ring_all_gather]") {
  auto start = std::chrono::steady_clock::now();
  auto run = [] {
    dpt_test::run_ranks(2, [](Context& ctx) {
      std::vector<Tensor> params = {Tensor::zeros({100}, ctx.device), Tensor::zeros({100}, ctx.device)};
      for (Tensor& p : params) p.set_grad(Tensor::zeros({100}, ctx.device));
      std::vector<Tensor> grads = {params[0].grad(), params[1].grad()};
      auto shared = ring_bucket_state(ctx, {{{1}, 400}, {{0}, 400}}, params);
      BucketState& state = *shared;
      mark_ready(state, 1);
      if (ctx.rank == 0) mark_ready(state, 0);  // rank 1 never gets fc.weight's gradient
      wait_and_unpack(state, grads, {"fc.weight", "fc.bias"});
    }, 30);
  };
  CHECK_THROWS_WITH(run(), contains_text("fc.weight") && contains_text("bucket 1"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 30);  // well within the communication timeout
}
