// test_ch13_run.cpp — chapter 13's run_schedule on P rank threads whose every
// send waits for its receive (support/ranks.h): each stage gets its
// neighbour's values for the right micro-batch, nothing else crosses the
// wire, 1F1B and GPipe finish, and a schedule that deadlocks is a bounded
// wait naming the ranks. The schedules here are found by the test on its own
// clock from the laws a schedule obeys (each stage's forwards in order, its
// backwards in order, B m after F m, at most min(P − s, M) micro-batches in
// flight, no stage idle while it could run an op), not taken from your
// one_f_one_b: a run_schedule mistake is never blamed on another hole.
#include "support/catch.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ch13.h"
#include "dpt/launch.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch13;

namespace {

// Every stage's schedule, found on a clock (forward 1, backward 2) from the
// laws alone: stage s may run its next forward when fewer than room(s)
// micro-batches are in flight on it and stage s−1 has finished that forward,
// its oldest backward once stage s+1 has finished that backward; no stage
// waits while an op it may run is ready (ops are placed in order of their
// earliest start; at equal starts `seed` picks, 0: the backward). The
// schedules can therefore run to the end as inputs arrive. `end` is when the
// last op ends. With room min(P − s, M) they hold what 1F1B holds.
struct Found {
  std::vector<std::vector<Op>> ops;
  int end = 0;
};
template <class Room>
Found schedules_on_a_clock(int P, int M, const Room& room, unsigned seed) {
  std::mt19937 random(seed);
  Found found;
  found.ops.resize(std::size_t(P));
  const int never = 1 << 30;
  // done[s][m]: when F m (pass 0) or B m (pass 1) ended on stage s; never until it has.
  std::vector<std::vector<int>> f_done(std::size_t(P), std::vector<int>(std::size_t(M), never)), b_done = f_done;
  std::vector<int> free_at(std::size_t(P), 0), forwarded(std::size_t(P), 0), backwarded(std::size_t(P), 0);
  for (int left = 2 * M * P; left > 0; --left) {
    struct Candidate { int start, s; Pass pass; };
    std::vector<Candidate> can;
    for (int s = 0; s < P; ++s) {
      const std::size_t k = std::size_t(s);
      const int f = forwarded[k], b = backwarded[k];
      if (f < M && f - b < room(s)) {
        const int input = s == 0 ? 0 : f_done[k - 1][std::size_t(f)];
        if (input < never) can.push_back({std::max(free_at[k], input), s, Pass::Forward});
      }
      if (b < f) {
        const int input = s == P - 1 ? 0 : b_done[k + 1][std::size_t(b)];
        if (input < never) can.push_back({std::max(free_at[k], input), s, Pass::Backward});
      }
    }
    REQUIRE(!can.empty());  // the search itself is stuck: a bug in this test
    int first = never;
    for (const Candidate& c : can) first = std::min(first, c.start);
    std::vector<Candidate> earliest;
    for (const Candidate& c : can)
      if (c.start == first) earliest.push_back(c);
    std::stable_sort(earliest.begin(), earliest.end(), [](const Candidate& x, const Candidate& y) {
      return x.pass == Pass::Backward && y.pass == Pass::Forward;
    });
    const Candidate c = seed == 0 ? earliest.front()
                                  : earliest[std::uniform_int_distribution<std::size_t>(0, earliest.size() - 1)(random)];
    const std::size_t k = std::size_t(c.s);
    const bool forward = c.pass == Pass::Forward;
    int& count = forward ? forwarded[k] : backwarded[k];
    free_at[k] = c.start + (forward ? 1 : 2);
    (forward ? f_done : b_done)[k][std::size_t(count)] = free_at[k];
    found.ops[k].push_back({c.pass, count++});
    found.end = std::max(found.end, free_at[k]);
  }
  return found;
}

std::vector<Op> all_forward_then_backward(int M) {
  std::vector<Op> ops;
  for (int m = 0; m < M; ++m) ops.push_back({Pass::Forward, m});
  for (int m = 0; m < M; ++m) ops.push_back({Pass::Backward, m});
  return ops;
}

// What one stage saw: problems found, and the ops in the order it was asked.
struct Seen {
  std::vector<std::string> problems;
  std::vector<Op> calls;
};

// A stage whose values say where they come from: F m on stage s returns
// 1000m + s + 1 everywhere (so stage s expects 1000m + s from s−1); B m on
// stage s returns −(1000m + s) (so it expects −(1000m + s + 1) from s+1).
StageWork labelled_stage(int s, int P, Seen& seen) {
  const Shape shape = {2, 3};
  StageWork work;
  work.input_buffer = [shape](int) { return Tensor::zeros(shape, Device::host()); };
  work.output_grad_buffer = [shape](int) { return Tensor::zeros(shape, Device::host()); };
  auto expect = [&seen, s](const char* what, int m, const Tensor& t, bool defined, float value) {
    std::ostringstream out;
    if (t.defined() != defined) {
      out << "stage " << s << ": " << what << m << " was handed " << (defined ? "no tensor" : "a tensor")
          << (defined ? " where its neighbour's value was due" : " where none exists (no neighbour on that side)");
    } else if (defined) {
      for (int64_t k = 0; k < t.numel(); ++k)
        if (t.data()[k] != value) {
          out << "stage " << s << ": " << what << m << " was handed " << t.data()[k] << " where " << value
              << " was due (" << (value > 0 ? "micro-batch m's activation from stage s-1" : "micro-batch m's gradient from stage s+1")
              << ")";
          break;
        }
    }
    if (!out.str().empty()) seen.problems.push_back(out.str());
  };
  work.forward = [=, &seen](int m, const Tensor& input) {
    seen.calls.push_back({Pass::Forward, m});
    expect("F", m, input, s > 0, float(1000 * m + s));
    return s + 1 < P ? Tensor::full(shape, float(1000 * m + s + 1), Device::host()) : Tensor();
  };
  work.backward = [=, &seen](int m, const Tensor& output_grad) {
    seen.calls.push_back({Pass::Backward, m});
    expect("B", m, output_grad, s + 1 < P, -float(1000 * m + s + 1));
    return s > 0 ? Tensor::full(shape, -float(1000 * m + s), Device::host()) : Tensor();
  };
  return work;
}

// Runs `schedule(s)` on P stages with rendezvous sends; returns what each saw
// and the traffic matrix (bytes).
struct Outcome {
  std::vector<Seen> seen;
  std::vector<std::vector<int64_t>> traffic;
};
template <class Schedule>
Outcome run(int P, const Schedule& schedule, double timeout_s = 3) {
  Outcome out;
  out.seen.resize(std::size_t(P));
  dpt_test::run_ranks(P, [&](Context& ctx) {
    run_schedule(ctx.comm, schedule(ctx.rank), labelled_stage(ctx.rank, P, out.seen[std::size_t(ctx.rank)]));
    TrafficLog log = ctx.comm.gather_traffic();
    if (ctx.rank == 0) out.traffic = log.matrix();
  }, timeout_s);
  return out;
}

}  // namespace

TEST_CASE("run_schedule: each stage gets its neighbour's values, micro-batch by micro-batch, in its schedule's order",
          "[ch13][hole:run_schedule]") {
  for (int P : {1, 2, 3, 4})
    for (int M : {1, 3, 5})
      for (unsigned draw = 0; draw < 4; ++draw) {  // draw 0: GPipe; then three found with 1F1B's room
        const Found found = schedules_on_a_clock(P, M, [&](int s) { return std::min(P - s, M); }, draw - 1);
        const std::vector<std::vector<Op>>& drawn = found.ops;
        auto schedule = [&](int s) { return draw == 0 ? all_forward_then_backward(M) : drawn[std::size_t(s)]; };
        INFO((draw == 0 ? "GPipe" : "schedules with at most min(P - s, M) in flight on stage s") << ", P = " << P << ", M = " << M);
        std::string schedules;
        for (int s = 0; s < P; ++s) schedules += "\n  stage " + std::to_string(s) + ": " + schedule_text(schedule(s));
        INFO("the schedules:" << schedules);
        Outcome o;
        try {
          o = run(P, schedule);
        } catch (const Timeout& e) {
          FAIL("run_schedule deadlocked with every send a rendezvous (a send returns once its receive is posted, "
               "as MPI may do for any send): stages waited for each other in a cycle. The timeout said: " << e.what());
        }
        for (int s = 0; s < P; ++s) {
          const Seen& seen = o.seen[std::size_t(s)];
          INFO("stage " << s);
          for (const std::string& problem : seen.problems) FAIL_CHECK(problem);
          std::vector<Op> asked = schedule(s);
          INFO("work.forward / work.backward must be called once per op, in the schedule's order");
          CHECK(seen.calls == asked);
        }
        const int64_t per_direction = int64_t(M) * 2 * 3 * 4;  // M tensors of 2 x 3 floats
        for (int a = 0; a < P; ++a)
          for (int b = 0; b < P; ++b) {
            INFO("bytes stage " << a << " sent to stage " << b << ": " << o.traffic[std::size_t(a)][std::size_t(b)]);
            if (b == a + 1 || b == a - 1) {
              INFO("neighbours exchange exactly M activations up and M gradients down");
              CHECK(o.traffic[std::size_t(a)][std::size_t(b)] == per_direction);
            } else {
              INFO("only neighbouring stages talk");
              CHECK(o.traffic[std::size_t(a)][std::size_t(b)] == 0);
            }
          }
      }
}

TEST_CASE("run_schedule: schedules with at most P - s micro-batches in flight on stage s (P <= 5 and M <= 8) finish although "
          "every send waits for its receive",
          "[ch13][hole:run_schedule]") {
  for (int P = 2; P <= 5; ++P)
    for (int M = 1; M <= 8; ++M)
      for (unsigned seed = 0; seed < 3; ++seed) {
        const Found found = schedules_on_a_clock(P, M, [&](int s) { return std::min(P - s, M); }, seed);
        const std::vector<std::vector<Op>>& drawn = found.ops;
        INFO("the test's own search: the stages end at (M + P - 1)(f + b) as 1F1B does");
        REQUIRE(found.end == (M + P - 1) * 3);
        try {
          run(P, [&](int s) { return drawn[std::size_t(s)]; });
        } catch (const Timeout& e) {
          std::string schedules;
          for (int s = 0; s < P; ++s) schedules += "\n  stage " + std::to_string(s) + ": " + schedule_text(drawn[std::size_t(s)]);
          FAIL("P = " << P << ", M = " << M << ": run_schedule deadlocked with every send a rendezvous on these schedules, "
               "which can run to the end as their inputs arrive:" << schedules << "\nWhen a stage hands a result to one "
               "neighbour while that neighbour hands one back, and both send before they receive, each send waits for a "
               "receive that never comes. The timeout said: " << e.what());
        }
      }
}

TEST_CASE("run_schedule: a schedule that deadlocks is a bounded wait naming the ranks", "[ch13][hole:run_schedule]") {
  // Stage 0 wants B0's gradient before it forwards micro-batch 1; stage 1
  // wants micro-batch 1's activation before it runs B0. Neither can move.
  auto schedule = [](int s) {
    return s == 0 ? std::vector<Op>{{Pass::Forward, 0}, {Pass::Backward, 0}, {Pass::Forward, 1}, {Pass::Backward, 1}}
                  : all_forward_then_backward(2);
  };
  std::string message;
  try {
    run(2, schedule, 0.5);
  } catch (const Timeout& e) {
    message = e.what();
  }
  INFO("a deadlocking pair of schedules must end in dpt::Timeout after --comm-timeout, naming the waiting ranks; got: "
       << (message.empty() ? "no timeout" : message));
  REQUIRE(!message.empty());
  CHECK(message.find("rank 0") != std::string::npos);
  CHECK(message.find("rank 1") != std::string::npos);
}
