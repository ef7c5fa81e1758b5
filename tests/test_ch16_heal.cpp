// test_ch16_heal.cpp — your hole, ch16::heal, against its laws: a member
// behind, once healed, takes the next step exactly as the source does; the
// others are untouched and sent nothing; no more bytes cross the wire than
// that next step needs; every member keeps who it is. "The next step" is
// written out here: its samples from the cursor, momentum SGD, one more
// committed step (not the chapter's code).
#include "support/catch.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "ch16.h"
#include "dpt/quorum_group.h"
#include "elastic_rank.h"

using namespace dpt;
using namespace dpt::ch16;

namespace {

constexpr int kHealTestPsi = 6;

// Member m's state before the heal: members in `current` hold the run's
// newest state (each with its own identity, gradient and timing); the others
// hold a new process's (m even) or a stale replica's (m odd).
MemberState heal_test_state(int m, bool current) {
  MemberState s;
  s.replica.params.resize(kHealTestPsi), s.replica.momentum.resize(kHealTestPsi);
  for (int i = 0; i < kHealTestPsi; ++i) {
    s.replica.params[std::size_t(i)] = current ? 0.25f * float(i) - 0.5f : 0.01f * float(m * 7 + i);
    s.replica.momentum[std::size_t(i)] = current ? 0.125f * float(3 - i) : (m % 2 ? -0.5f : 0.0f);
  }
  s.committed = current ? 17 : (m % 2 ? 11 : 0);
  s.cursor = current ? 136 : (m % 2 ? 88 : 0);
  if (current || m % 2) s.grad.assign(kHealTestPsi, 0.03f * float(m + 1));
  s.world_rank = 100 + m;
  s.step_seconds = 0.5 + double(m);
  return s;
}

// What a member holds after its next step, and tells the lighthouse.
struct HealNextStep {
  std::vector<float> params, momentum;
  int64_t committed, cursor;
  bool operator==(const HealNextStep& o) const {
    return params == o.params && momentum == o.momentum && committed == o.committed && cursor == o.cursor;
  }
};
HealNextStep heal_next_step(const MemberState& s) {
  HealNextStep n{s.replica.params, s.replica.momentum, s.committed + 1, s.cursor + kHealTestPsi};
  if (n.params.size() != std::size_t(kHealTestPsi) || n.momentum.size() != std::size_t(kHealTestPsi)) return n;
  for (int i = 0; i < kHealTestPsi; ++i) {
    const float g = 0.03125f * float(sample_at(s.cursor + i, 96, 5) + 1);  // the step's samples
    n.momentum[std::size_t(i)] = 0.9f * n.momentum[std::size_t(i)] + g;
    n.params[std::size_t(i)] -= 0.25f * n.momentum[std::size_t(i)];
  }
  return n;
}
// The least bytes a member behind needs: what a step leaves it holding (the
// same a step starts from), counted from HealNextStep's own terms.
constexpr int64_t kHealTestLeast = int64_t(sizeof(float)) * 2 * kHealTestPsi + int64_t(sizeof(int64_t)) * 2;

struct HealRun {
  std::vector<MemberState> before, after;
  std::vector<std::string> error;    // "" when heal returned on that member
  std::vector<int64_t> received;     // bytes sent to each member, by anyone
};

// heal on a fresh group of `n`, each member on its own thread.
HealRun run_heal(int n, int source, const std::vector<int>& behind) {
  auto group = make_threads_group(n, 2.0);
  HealRun r;
  for (int m = 0; m < n; ++m)
    r.before.push_back(heal_test_state(m, std::count(behind.begin(), behind.end(), m) == 0));
  r.after = r.before;
  r.error.resize(std::size_t(n));
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m)
    threads.emplace_back([&, m] {
      try {
        heal(*group[std::size_t(m)], source, behind, r.after[std::size_t(m)]);
      } catch (const std::exception& e) {  // the hole unwritten, a timeout: its words, in the check
        r.error[std::size_t(m)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  r.received.assign(std::size_t(n), 0);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) r.received[std::size_t(d)] += group[std::size_t(s)]->traffic().bytes(s, d);
  return r;
}

struct HealCase {
  int n, source;
  std::vector<int> behind;
};
const std::vector<HealCase> kHealCases = {{2, 0, {1}}, {3, 2, {0, 1}}, {4, 1, {0, 3}}, {5, 3, {1}}};

}  // namespace

TEST_CASE("heal: each member behind then takes the next step exactly as the source does", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    const HealNextStep want = heal_next_step(r.before[std::size_t(c.source)]);
    for (int m : c.behind) {
      INFO(c.n << " members, source " << c.source << ", member " << m << " behind: "
                << (r.error[std::size_t(m)].empty() ? "healed" : r.error[std::size_t(m)]));
      REQUIRE(r.error[std::size_t(m)].empty());
      const HealNextStep got = heal_next_step(r.after[std::size_t(m)]);
      INFO("then one step: parameters " << (got.params == want.params ? "equal" : "differ") << ", momentum "
                << (got.momentum == want.momentum ? "equal" : "differ") << ", committed " << got.committed << " vs "
                << want.committed << ", cursor " << got.cursor << " vs " << want.cursor << " (the source's)");
      CHECK(got == want);
    }
  }
}

TEST_CASE("heal: the source and every member in step are unchanged and sent nothing", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    for (int m = 0; m < c.n; ++m) {
      if (std::count(c.behind.begin(), c.behind.end(), m)) continue;
      const MemberState& a = r.after[std::size_t(m)];
      const MemberState& b = r.before[std::size_t(m)];
      INFO(c.n << " members, source " << c.source << ", member " << m << (m == c.source ? " (the source)" : " (in step)")
                << ": " << (r.error[std::size_t(m)].empty() ? "returned" : r.error[std::size_t(m)]) << ", was sent "
                << r.received[std::size_t(m)] << " B");
      CHECK(r.error[std::size_t(m)].empty());
      CHECK(r.received[std::size_t(m)] == 0);
      CHECK(a.replica.params == b.replica.params);
      CHECK(a.replica.momentum == b.replica.momentum);
      CHECK(a.committed == b.committed);
      CHECK(a.cursor == b.cursor);
      CHECK(a.grad == b.grad);
      CHECK(a.world_rank == b.world_rank);
      CHECK(a.step_seconds == b.step_seconds);
    }
  }
}

TEST_CASE("heal: a member behind is sent no more than the least its next step needs", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    for (int m : c.behind) {
      INFO(c.n << " members, member " << m << " behind was sent " << r.received[std::size_t(m)] << " B; what its "
                << "next step reads, and what it then tells the lighthouse, is " << kHealTestLeast << " B"
                << (r.error[std::size_t(m)].empty() ? "" : " — " + r.error[std::size_t(m)]));
      CHECK(r.error[std::size_t(m)].empty());
      CHECK(r.received[std::size_t(m)] <= kHealTestLeast);
      CHECK(r.received[std::size_t(m)] > 0);
    }
  }
}

TEST_CASE("heal: every member keeps who it is", "[ch16][hole:heal]") {
  const HealRun r = run_heal(4, 1, {0, 3});
  for (int m = 0; m < 4; ++m) {
    INFO("member " << m << " was world rank " << r.before[std::size_t(m)].world_rank << " and is now "
                   << r.after[std::size_t(m)].world_rank
                   << (r.error[std::size_t(m)].empty() ? "" : " — " + r.error[std::size_t(m)]));
    CHECK(r.error[std::size_t(m)].empty());
    CHECK(r.after[std::size_t(m)].world_rank == r.before[std::size_t(m)].world_rank);
  }
}

TEST_CASE("heal: with nobody behind, nothing moves", "[ch16][hole:heal]") {
  const HealRun r = run_heal(3, 0, {});
  for (int m = 0; m < 3; ++m) {
    INFO("member " << m << ": " << (r.error[std::size_t(m)].empty() ? "returned" : r.error[std::size_t(m)])
                   << ", was sent " << r.received[std::size_t(m)] << " B");
    CHECK(r.error[std::size_t(m)].empty());
    CHECK(r.received[std::size_t(m)] == 0);
    CHECK(heal_next_step(r.after[std::size_t(m)]) == heal_next_step(r.before[std::size_t(m)]));
  }
}
