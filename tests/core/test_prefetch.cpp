// test_prefetch.cpp — dpt::Prefetch in host memory: a job runs off the rank's
// thread and may talk (on the progress thread), wait() returns once it is
// done and rethrows its error, take() says once per finished job that it
// ran, a second job in one slot is refused. (On a GPU its stream ordering is
// exercised by tests/gpu's ch07 --prefetch runs.)
#include "support/catch.h"
#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dpt/prefetch.h"
#include "support/ranks.h"

using namespace dpt;

TEST_CASE("prefetch: a job runs ahead, may talk, and take() reports it once", "[core]") {
  std::vector<float> got(2, 0.0f);
  std::vector<int> takes(2, -1), again(2, -1), idle(2, -1);
  dpt_test::run_ranks(2, [&](Context& ctx) {
    Prefetch ahead(ctx.comm, ctx.device, 3);
    float mine = float(10 + ctx.rank), theirs = 0;
    const std::thread::id rank_thread = std::this_thread::get_id();
    std::atomic<bool> elsewhere{false};
    ahead.start(1, [&] {
      elsewhere = std::this_thread::get_id() != rank_thread;
      const int peer = 1 - ctx.rank;
      ctx.comm.sendrecv(&mine, 1, peer, &theirs, 1, peer);
    });
    takes[std::size_t(ctx.rank)] = ahead.take(1);
    again[std::size_t(ctx.rank)] = ahead.take(1);
    idle[std::size_t(ctx.rank)] = ahead.take(2);
    got[std::size_t(ctx.rank)] = elsewhere ? theirs : -1.0f;
    ahead.used(Tensor::zeros({4}, ctx.device));  // host memory: nothing to order
    ahead.retire();
  });
  CHECK(got == std::vector<float>{11.0f, 10.0f});  // the peer's value, received on the progress thread
  CHECK(takes == std::vector<int>{1, 1});          // a finished job, reported once
  CHECK(again == std::vector<int>{0, 0});
  CHECK(idle == std::vector<int>{0, 0});           // a slot that never had a job
}

namespace {
std::string call_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("prefetch: wait() rethrows a job's error, and a slot holds one job at a time", "[core]") {
  std::string busy, outside, failed;
  dpt_test::run_ranks(1, [&](Context& ctx) {  // assertions stay on the test thread: record here
    Prefetch ahead(ctx.comm, ctx.device, 2);
    std::atomic<bool> release{false};
    ahead.start(0, [&] {
      while (!release) std::this_thread::yield();
      throw std::runtime_error("the gather failed");
    });
    busy = call_error([&] { ahead.start(0, [] {}); });
    outside = call_error([&] { ahead.start(5, [] {}); });
    release = true;
    failed = call_error([&] { ahead.wait(0); });
  });
  CHECK_THAT(busy, contains_text("slot 0"));
  CHECK_THAT(outside, contains_text("slot 5"));
  CHECK_THAT(failed, contains_text("the gather failed"));
}
