// test_ch13.cpp — chapter 13's schedule and accumulation holes, without
// communication: one_f_one_b against the properties its contract lists (a
// dependency clock written here, sharing no code with the chapter's), and
// accumulate_micro_batch against one device's gradient on the whole batch;
// and the chapter's clock (provided) against a timeline worked out by hand.
#include "support/catch.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ch13.h"
#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "pipeline_clock.h"

using namespace dpt;
using namespace dpt::ch13;

namespace {

std::string text(const std::vector<Op>& ops) {
  std::string out;
  for (const Op& op : ops) out += std::string(out.empty() ? "" : " ") + (op.pass == Pass::Forward ? "F" : "B") +
                                  std::to_string(op.micro_batch);
  return out;
}

// The test's own clock: an op ends `f` or `b` after the later of (the op before
// it on its stage ended, its input exists). Ends are worked out by recursion;
// a dependency met again while it is being worked out is a cycle: the
// schedules deadlock, and `deadlock` names the stages in it.
struct TestClock {
  const std::vector<std::vector<Op>>& schedules;
  double f, b;
  std::map<std::tuple<int, int, int>, double> done;  // (stage, pass, m) -> end
  std::vector<std::tuple<int, int, int>> path;  // the ops being worked out, each waiting for the next
  std::string deadlock;

  static std::string name(const std::tuple<int, int, int>& k) {
    return "stage " + std::to_string(std::get<0>(k)) + " at " + (std::get<1>(k) == int(Pass::Forward) ? "F" : "B") +
           std::to_string(std::get<2>(k));
  }

  int index_of(int s, Pass pass, int m) const {
    const auto& ops = schedules[std::size_t(s)];
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].pass == pass && ops[i].micro_batch == m) return int(i);
    return -1;
  }
  double end(int s, Pass pass, int m) {
    auto key = std::make_tuple(s, int(pass), m);
    if (done.count(key)) return done[key];
    auto in_path = std::find(path.begin(), path.end(), key);
    if (in_path != path.end()) {  // a cycle: every op on it waits for the next
      if (deadlock.empty()) {
        for (auto it = in_path; it != path.end(); ++it) deadlock += name(*it) + " waits for ";
        deadlock += name(key);
      }
      return 0;
    }
    path.push_back(key);
    const int i = index_of(s, pass, m);
    double start = 0;
    if (i > 0) {
      const Op& before = schedules[std::size_t(s)][std::size_t(i - 1)];
      start = end(s, before.pass, before.micro_batch);
    }
    const int P = int(schedules.size());
    if (pass == Pass::Forward && s > 0) start = std::max(start, end(s - 1, Pass::Forward, m));
    if (pass == Pass::Backward) start = std::max(start, s + 1 < P ? end(s + 1, Pass::Backward, m) : end(s, Pass::Forward, m));
    path.pop_back();
    return done[key] = start + (pass == Pass::Forward ? f : b);
  }
  double makespan(int M) {
    double last = 0;
    for (int s = 0; s < int(schedules.size()); ++s)
      for (int m = 0; m < M; ++m) last = std::max(last, end(s, Pass::Backward, m));
    return last;
  }
};

std::vector<std::vector<Op>> all_stages(int P, int M) {
  std::vector<std::vector<Op>> out;
  for (int s = 0; s < P; ++s) out.push_back(one_f_one_b(s, P, M));
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// one_f_one_b

TEST_CASE("one_f_one_b: every F m and B m once, each kind in order, B m after F m", "[ch13][hole:one_f_one_b]") {
  for (int P = 1; P <= 5; ++P)
    for (int M = 1; M <= 9; ++M)
      for (int s = 0; s < P; ++s) {
        std::vector<Op> ops = one_f_one_b(s, P, M);
        INFO("stage " << s << " of P = " << P << ", M = " << M << ": " << text(ops));
        REQUIRE(ops.size() == std::size_t(2 * M));
        int next_f = 0, next_b = 0;
        for (const Op& op : ops) {
          if (op.pass == Pass::Forward) {
            INFO("the forwards must be F0, F1, ... in order, each once");
            REQUIRE(op.micro_batch == next_f++);
          } else {
            INFO("the backwards must be B0, B1, ... in order, each once, and B m only after F m");
            REQUIRE(op.micro_batch == next_b++);
            REQUIRE(op.micro_batch < next_f);
          }
        }
      }
}

TEST_CASE("one_f_one_b: stage s never holds more than min(P - s, M) micro-batches in flight", "[ch13][hole:one_f_one_b]") {
  for (int P = 1; P <= 5; ++P)
    for (int M = 1; M <= 9; ++M)
      for (int s = 0; s < P; ++s) {
        std::vector<Op> ops = one_f_one_b(s, P, M);
        int held = 0, most = 0;
        for (const Op& op : ops) most = std::max(most, held += op.pass == Pass::Forward ? 1 : -1);
        INFO("stage " << s << " of P = " << P << ", M = " << M << ": " << text(ops) << " holds " << most
                      << " micro-batches' activations at once; 1F1B's memory bound is min(P - s, M) = "
                      << std::min(P - s, M) << " (GPipe holds all M)");
        CHECK(most <= std::min(P - s, M));
      }
}

TEST_CASE("one_f_one_b: the stages together finish in GPipe's time (M+P-1)(f+b), without deadlock", "[ch13][hole:one_f_one_b]") {
  for (int P = 1; P <= 5; ++P)
    for (int M = 1; M <= 9; ++M)
      for (auto [f, b] : {std::pair<double, double>{1, 2}, {1, 1}, {3, 1}}) {
        std::vector<std::vector<Op>> stages = all_stages(P, M);
        TestClock clock{stages, f, b, {}, {}, ""};
        const double took = clock.makespan(M);
        std::ostringstream all;
        for (int s = 0; s < P; ++s) all << "\n  stage " << s << ": " << text(stages[std::size_t(s)]);
        INFO("P = " << P << ", M = " << M << ", forward " << f << ", backward " << b << ":" << all.str());
        if (!clock.deadlock.empty())
          FAIL("the stages' schedules deadlock: " << clock.deadlock
               << " (an op waits for the op before it on its stage and for its input from the neighbour)");
        INFO("the step took " << took << " on the clock; GPipe's (M+P-1)(f+b) = " << (M + P - 1) * (f + b)
             << ": a stage waits for an input it could have had sooner, or idles where it could work");
        CHECK(took <= (M + P - 1) * (f + b) + 1e-9);
      }
}

// ----------------------------------------------------------------------------
// accumulate_micro_batch

namespace {

// Gradients of the mean loss of rows [a, b) of (x, y), one tensor per parameter.
std::vector<Tensor> gradient_of(MLP& model, const Tensor& x, const std::vector<int64_t>& y, int64_t a, int64_t b) {
  for (Tensor& p : model.parameters()) p.zero_grad();
  std::vector<int64_t> labels(y.begin() + a, y.begin() + b);
  backward(softmax_cross_entropy(model.forward(x.rows(a, b)), labels));
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
  return grads;
}

double largest_relative_gap(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      gap = std::max(gap, double(std::fabs(got[i].data()[k] - want[i].data()[k])));
      scale = std::max(scale, double(std::fabs(want[i].data()[k])));
    }
  return gap / scale;
}

}  // namespace

TEST_CASE("accumulate_micro_batch: micro-batches of 3, 5 and 8 samples add up to the 16-sample batch's gradient",
          "[ch13][hole:accumulate_micro_batch]") {
  Rng rng(7);
  MLP model({6, 5, 3}, Device::host(), rng);
  const int64_t B = 16;
  std::vector<float> xs;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B * 6; ++i) xs.push_back(rng.normal());
  for (int64_t i = 0; i < B; ++i) y.push_back(int64_t(rng.below(3)));
  Tensor x = Tensor::from_vector({B, 6}, xs, Device::host());
  const std::vector<Tensor> want = gradient_of(model, x, y, 0, B);  // one device, the whole batch's mean loss

  for (std::vector<int64_t> sizes : {std::vector<int64_t>{3, 5, 8}, {8, 5, 3}, {4, 4, 4, 4}, {16}}) {
    std::vector<Tensor> total;
    for (const Tensor& g : want) total.push_back(Tensor::zeros(g.shape(), Device::host()));
    std::string cut;
    for (int64_t start = 0, k = 0; k < int64_t(sizes.size()); start += sizes[std::size_t(k)], ++k) {
      const int64_t m = sizes[std::size_t(k)];
      std::vector<Tensor> micro = gradient_of(model, x, y, start, start + m);
      std::vector<Tensor> before;
      for (const Tensor& g : micro) before.push_back(g.clone());
      accumulate_micro_batch(total, micro, m, B);
      INFO("accumulate_micro_batch must not change micro_grads");
      CHECK(largest_relative_gap(micro, before) == 0);
      cut += (cut.empty() ? "" : " + ") + std::to_string(m);
    }
    const double gap = largest_relative_gap(total, want);
    bool all_zero = true;  // the tell-tale of a weight that came out 0
    for (const Tensor& g : total)
      for (int64_t k = 0; k < g.numel(); ++k) all_zero = all_zero && g.data()[k] == 0.0f;
    INFO("micro-batches of " << cut << " samples: the accumulated gradient is " << gap
         << " (relative to its largest entry) from the gradient of the whole batch's mean loss"
         << (all_zero ? ": it is zero everywhere. Is a weight 0, e.g. an integer division?" : ".") << " Each of the " << B
         << " samples must count once and equally, whatever the size of the micro-batch it came in");
    CHECK(gap <= 1e-5);  // the same float sums in another order: ~1e-7
  }
}

// ----------------------------------------------------------------------------
// the chapter's clock (provided), against numbers worked out by hand

TEST_CASE("pipeline clock: GPipe on 3 stages and 2 micro-batches by hand, and a deadlock named by stage", "[ch13]") {
  // f = 1, b = 2. Stage 0: F0 0-1, F1 1-2; stage 1: F0 1-2, F1 2-3; stage 2: F0 2-3, F1 3-4,
  // B0 4-6, B1 6-8; stage 1: B0 6-8, B1 8-10; stage 0: B0 8-10, B1 10-12. T = (M+P-1)(f+b) = 12.
  std::vector<std::vector<Op>> gp = {gpipe(0, 3, 2), gpipe(1, 3, 2), gpipe(2, 3, 2)};
  Timeline t = replay_pipeline(gp, [](int, const Op& op) { return op.pass == Pass::Forward ? 1.0 : 2.0; });
  CHECK(makespan(t) == 12);
  CHECK(t[0][3].start == 10);  // stage 0's B1
  CHECK(t[2][2].start == 4);   // stage 2's B0
  CHECK(busy_seconds(t, 1) == 6);
  CHECK(bubble_fraction(t) == Approx(1 - 18.0 / 36.0));
  CHECK(bubble_formula(3, 2) == Approx(0.5));
  std::vector<std::vector<Op>> stuck = {{{Pass::Forward, 0}, {Pass::Backward, 0}, {Pass::Forward, 1}, {Pass::Backward, 1}},
                                        gpipe(1, 2, 2)};
  try {
    replay_pipeline(stuck, [](int, const Op&) { return 1.0; });
    FAIL("a deadlocking pair of schedules must be an error");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("stage 0 waits at B0 for B0 on stage 1") != std::string::npos);
    CHECK(std::string(e.what()).find("stage 1 waits at F1 for F1 on stage 0") != std::string::npos);
  }
}

TEST_CASE("pipeline clock: the Gantt chart ends each row with the stage's peak in flight, red over its bound", "[ch13]") {
  // GPipe's schedules drawn against 1F1B's bounds (P = 2, M = 3): both stages hold all 3, stage 0 may hold 2, stage 1 one.
  Timeline t = replay_pipeline({gpipe(0, 2, 3), gpipe(1, 2, 3)}, [](int, const Op&) { return 1.0; });
  CHECK(peak_in_flight(t, 0) == 3);
  CHECK(peak_in_flight(t, 1) == 3);
  const std::string path = "ch13_test_peaks.svg";
  write_gantt_svg(path, "peaks", {{"gpipe", t}}, {{2, 1}});
  std::stringstream svg;
  svg << std::ifstream(path).rdbuf();
  std::remove(path.c_str());
  INFO(svg.str());
  CHECK(svg.str().find("fill=\"#c00000\" font-weight=\"bold\">peak 3 (\u2264 2)</text>") != std::string::npos);
  CHECK(svg.str().find("fill=\"#c00000\" font-weight=\"bold\">peak 3 (\u2264 1)</text>") != std::string::npos);
  write_gantt_svg(path, "peaks", {{"gpipe", t}});  // no bounds: the peaks alone, nothing red
  std::stringstream plain;
  plain << std::ifstream(path).rdbuf();
  std::remove(path.c_str());
  CHECK(plain.str().find(">peak 3</text>") != std::string::npos);
  CHECK(plain.str().find("#c00000") == std::string::npos);
}
