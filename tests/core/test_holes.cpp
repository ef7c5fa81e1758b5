// test_holes.cpp — running a lecture past an unwritten hole (dpt/holes.h) on
// rank threads: a hole thrown on every rank before any message is recorded
// and the next part runs; one thrown on some ranks only stops the run with an
// error naming the hole, and one a peer waits on is a bounded wait.
#include "support/catch.h"

#include <atomic>
#include <chrono>

#include "dpt/check.h"
#include "dpt/holes.h"
#include "support/ranks.h"

using namespace dpt;

namespace {
const char* kHole = "test: the hole — see exercises/nowhere.cpp";

// The message a student's hole throws on `ctx`'s rank.
[[noreturn]] void unwritten() { throw NotImplemented(kHole); }

// The first rank's error from running `body` on `world` rank threads ("" if none).
std::string error_of(int world, const std::function<void(Context&)>& body, double timeout_s = 10) {
  try {
    dpt_test::run_ranks(world, body, timeout_s);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a hole thrown on every rank before any message is recorded and the next part runs", "[holes]") {
  // Catch2's CHECK is not for rank threads: each rank writes what it saw, the test thread judges.
  struct Seen {
    bool first_recorded = false, message = false, next_ran = false, sums = false, twice_listed_once = false,
         verdict_fails = false, verdict_names = false;
  };
  std::vector<Seen> seen(4);
  const std::string error = error_of(4, [&](Context& ctx) {
    Seen& s = seen[std::size_t(ctx.rank)];
    Holes holes;
    s.first_recorded = !holes.run(ctx.comm, [] { unwritten(); });
    s.message = holes.last() == std::string("not implemented: ") + kHole;
    float one = 1;
    s.next_ran = holes.run(ctx.comm, [&] { ctx.comm.all_reduce(&one, 1, ReduceOp::Sum); });  // a clean communicator
    s.sums = one == 4;
    s.twice_listed_once = !holes.run(ctx.comm, [] { unwritten(); }) && holes.missing().size() == 1;  // met twice
    Verdicts v;
    holes.judge(v);
    s.verdict_fails = v.exit_code() == kVerdictFailed;
    s.verdict_names = !v.all().empty() && v.all()[0].why == std::string("not yet: not implemented: ") + kHole;
  });
  CHECK(error == "");
  for (std::size_t r = 0; r < seen.size(); ++r) {
    INFO("rank " << r);
    CHECK(seen[r].first_recorded);
    CHECK(seen[r].message);
    CHECK(seen[r].next_ran);
    CHECK(seen[r].sums);
    CHECK(seen[r].twice_listed_once);
    CHECK(seen[r].verdict_fails);
    CHECK(seen[r].verdict_names);
  }
}

TEST_CASE("every part ran: the holes verdict passes", "[holes]") {
  Holes holes;
  CHECK(holes.run_here([] {}));
  Verdicts v;
  holes.judge(v);
  CHECK(v.exit_code() == 0);
  CHECK(holes.last().empty());
}

TEST_CASE("a hole thrown on one rank only stops the run naming the hole and the rank", "[holes]") {
  // A communicator timeout of 120 s: the agreement must stop the run, not the timeout. Half of it
  // leaves a loaded machine all the room it needs (measured here: well under a second).
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of(4, [&](Context& ctx) {
    Holes holes;
    holes.run(ctx.comm, [&] {
      if (ctx.rank == 2) unwritten();
    });
  }, 120);
  CHECK(error.find(kHole) != std::string::npos);
  CHECK(error.find("rank(s) 2 only") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));  // not the 120 s timeout
}

TEST_CASE("a hole thrown while a peer waits on the thrower's message is a bounded wait, not a hang", "[holes]") {
  const std::string error = error_of(
      2,
      [&](Context& ctx) {
        Holes holes;
        holes.run(ctx.comm, [&] {
          float x = 0;
          if (ctx.rank == 0) unwritten();  // rank 1 waits for what rank 0 never sends
          ctx.comm.recv(&x, 1, 0);
        });
      },
      1.0);
  CHECK(error != "");
  CHECK(error.find("rank 0") != std::string::npos);
}

TEST_CASE("a hole thrown on every rank after an exchange that finished is recorded", "[holes]") {
  std::atomic<int> recorded{0}, next_part_received{0};
  const std::string error = error_of(2, [&](Context& ctx) {
    Holes holes;
    float x = float(ctx.rank);
    if (!holes.run(ctx.comm, [&] {
          if (ctx.rank == 0) ctx.comm.send(&x, 1, 1);  // a training run's set-up, say
          else ctx.comm.recv(&x, 1, 0);
          unwritten();
        }))
      ++recorded;
    float y = 7;  // the next part's message is the one received
    if (ctx.rank == 0) ctx.comm.send(&y, 1, 1);
    else ctx.comm.recv(&y, 1, 0);
    if (y == 7) ++next_part_received;
  });
  CHECK(error == "");
  CHECK(recorded == 2);
  CHECK(next_part_received == 2);
}

TEST_CASE("a hole thrown on every rank after a library collective that returned is recorded", "[holes]") {
  std::atomic<int> recorded{0};
  const std::string error = error_of(3, [&](Context& ctx) {
    float one = 1;
    if (!unwritten_hole(ctx.comm, [&] {
          ctx.comm.all_reduce(&one, 1, ReduceOp::Sum);  // as ch10's top-k gathers, then decodes in the hole
          unwritten();
        }).empty())
      ++recorded;
  });
  CHECK(error == "");
  CHECK(recorded == 3);
}

TEST_CASE("ranks not taking part join the agreement and see the members' hole", "[holes]") {
  std::atomic<int> recorded{0};
  const std::string error = error_of(3, [&](Context& ctx) {
    Holes holes;
    const bool member = ctx.rank < 2;
    if (!holes.run(ctx.comm, [] { unwritten(); }, member) && holes.last().find(kHole) != std::string::npos) ++recorded;
  });
  CHECK(error == "");
  CHECK(recorded == 3);
}

TEST_CASE("other errors pass through the holes mechanism unchanged", "[holes]") {
  Holes holes;
  CHECK_THROWS_WITH(holes.run_here([] { throw Error("a plain error"); }), "a plain error");
  CHECK(holes.all_written());
}
