// test_ch13_run.cpp — chapter 13's run_schedule on P rank threads whose every
// send waits for its receive (support/ranks.h): each stage gets its
// neighbour's values for the right micro-batch, nothing else crosses the
// wire, 1F1B and GPipe finish, and a schedule that deadlocks is a bounded
// wait naming the ranks. The 1F1B schedules here are written out by the test
// (Megatron's warm-up count), not your one_f_one_b.
#include "support/catch.h"

#include <algorithm>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "ch13.h"
#include "dpt/launch.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch13;

namespace {

// Megatron-LM's 1F1B for stage s: P−s−1 warm-up forwards, then one forward
// and one backward M−w times, then the w backwards left.
std::vector<Op> megatron_1f1b(int s, int P, int M) {
  const int warm = std::min(P - s - 1, M);
  std::vector<Op> ops;
  int f = 0, b = 0;
  for (int i = 0; i < warm; ++i) ops.push_back({Pass::Forward, f++});
  for (int i = 0; i < M - warm; ++i) ops.push_back({Pass::Forward, f++}), ops.push_back({Pass::Backward, b++});
  while (b < M) ops.push_back({Pass::Backward, b++});
  return ops;
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
      for (bool gpipe_order : {true, false}) {
        auto schedule = [&](int s) { return gpipe_order ? all_forward_then_backward(M) : megatron_1f1b(s, P, M); };
        INFO((gpipe_order ? "GPipe" : "1F1B") << ", P = " << P << ", M = " << M);
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

TEST_CASE("run_schedule: 1F1B with P up to 5 and M up to 8 finishes although every send waits for its receive",
          "[ch13][hole:run_schedule]") {
  for (int P = 2; P <= 5; ++P)
    for (int M = 1; M <= 8; ++M) {
      try {
        run(P, [&](int s) { return megatron_1f1b(s, P, M); });
      } catch (const Timeout& e) {
        FAIL("P = " << P << ", M = " << M << ": run_schedule deadlocked with every send a rendezvous. In 1F1B's steady "
             "state a stage hands a result to one neighbour while that neighbour hands one back: if both send "
             "before they receive, each send waits for a receive that never comes. The timeout said: " << e.what());
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
