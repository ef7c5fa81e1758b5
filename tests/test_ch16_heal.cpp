// test_ch16_heal.cpp — your hole, ch16::heal, against its laws: a member
// behind, once healed, is a replica like the source (stepped beside it, the
// run sees the same parameters and committed steps, step after step); the
// others are untouched and nothing reaches them; no byte crosses the wire
// that a member behind can do without (judged by experiment: the bytes stay
// the same when the members' last gradients grow, and when fewer members
// heal); every member keeps what is its own. "The next step" is written out
// here (not the chapter's code).
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
// hold a new process's (m even) or a stale member's (m odd). A last gradient
// holds `grad_floats` floats.
MemberState heal_test_state(int m, bool current, int grad_floats) {
  MemberState s;
  s.replica.params.resize(kHealTestPsi), s.replica.momentum.resize(kHealTestPsi);
  for (int i = 0; i < kHealTestPsi; ++i) {
    s.replica.params[std::size_t(i)] = current ? 0.25f * float(i) - 0.5f : 0.01f * float(m * 7 + i);
    s.replica.momentum[std::size_t(i)] = current ? 0.125f * float(3 - i) : (m % 2 ? -0.5f : 0.0f);
  }
  s.committed = current ? 17 : (m % 2 ? 11 : 0);
  s.cursor = current ? 136 : (m % 2 ? 88 : 0);
  if (current || m % 2) s.grad.assign(std::size_t(grad_floats), 0.03f * float(m + 1));
  s.world_rank = 100 + m;
  s.step_seconds = 0.5 + double(m);
  return s;
}

// One step of a member, written small: a gradient from the samples at its
// place in the stream, applied (apply_momentum, ch16.h), one committed step more.
MemberState heal_test_stepped(MemberState s) {
  if (s.replica.params.size() != std::size_t(kHealTestPsi) || s.replica.momentum.size() != std::size_t(kHealTestPsi))
    return s;
  s.grad.assign(std::size_t(kHealTestPsi), 0.0f);
  for (int i = 0; i < kHealTestPsi; ++i) s.grad[std::size_t(i)] = 0.03125f * float(sample_at(s.cursor + i, 96, 5) + 1);
  apply_momentum(s.replica, s.grad, 0.25f);
  s.committed += 1, s.cursor += kHealTestPsi;
  return s;
}

// Unchanged: every field of `a` as in `b`.
bool heal_test_same(const MemberState& a, const MemberState& b) {
  return a.replica.params == b.replica.params && a.replica.momentum == b.replica.momentum &&
         a.committed == b.committed && a.cursor == b.cursor && a.grad == b.grad && a.world_rank == b.world_rank &&
         a.step_seconds == b.step_seconds;
}

// Law 1 by behaviour: `healed` and `source` side by side, right after the
// heal and after each of three steps, as the run sees a member (its
// parameters, the committed steps it tells the lighthouse). Where they first
// part, in words, with the questions that parting raises; "" when they never do.
std::string heal_test_parted(MemberState healed, MemberState source) {
  if (healed.replica.params.size() != source.replica.params.size() ||
      healed.replica.momentum.size() != source.replica.momentum.size())
    return " right after the heal: its replica has another shape than the source's";
  for (int k = 0; k <= 3; ++k) {
    if (k > 0) healed = heal_test_stepped(healed), source = heal_test_stepped(source);
    const bool params = healed.replica.params != source.replica.params;
    const bool committed = healed.committed != source.committed;
    if (!params && !committed) continue;
    std::string d = k == 0 ? " right after the heal" : " at step " + std::to_string(k) + " (equal before it)";
    if (committed)
      d += ": it tells the lighthouse " + std::to_string(healed.committed) + " committed steps, the source " +
           std::to_string(source.committed);
    if (params && k == 0) d += ": its parameters are not the source's";
    if (params && k > 0)
      d += ": the same parameters took another update than the source's — did it draw other samples than the "
           "source? did its optimizer start from other buffers?";
    return d;
  }
  return "";
}

struct HealRun {
  std::vector<MemberState> before, after;
  std::vector<std::string> error;  // "" when heal returned on that member
  std::vector<int64_t> wire;       // bytes sent to each member point to point, by anyone
  std::vector<int64_t> collective; // payload each member passed to a library collective
  int64_t reached(int m) const { return wire[std::size_t(m)] + collective[std::size_t(m)]; }
  std::string reached_text(int m) const {
    return std::to_string(wire[std::size_t(m)]) + " B sent to it" +
           (collective[std::size_t(m)] ? ", and " + std::to_string(collective[std::size_t(m)]) +
                                             " B through a collective (a collective reaches every member of the "
                                             "group, in step or not)"
                                       : "");
  }
};

// heal on a fresh group of `n`, each member on its own thread.
HealRun run_heal(int n, int source, const std::vector<int>& behind, int grad_floats = kHealTestPsi) {
  auto group = make_threads_group(n, 2.0);
  HealRun r;
  for (int m = 0; m < n; ++m)
    r.before.push_back(heal_test_state(m, std::count(behind.begin(), behind.end(), m) == 0, grad_floats));
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
  for (int d = 0; d < n; ++d) {
    int64_t wire = 0, coll = 0;
    for (int s = 0; s < n; ++s) wire += group[std::size_t(s)]->traffic().bytes(s, d);
    for (const char* name : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"})
      coll += group[std::size_t(d)]->traffic().collective_bytes(name, d);
    r.wire.push_back(wire), r.collective.push_back(coll);
  }
  return r;
}

struct HealCase {
  int n, source;
  std::vector<int> behind;
};
const std::vector<HealCase> kHealCases = {{2, 0, {1}}, {3, 2, {0, 1}}, {4, 1, {0, 3}}, {5, 3, {1}}};

}  // namespace

TEST_CASE("heal: each member behind is then a replica like the source, step after step", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    for (int m : c.behind) {
      INFO(c.n << " members, source " << c.source << ", member " << m << " behind: "
                << (r.error[std::size_t(m)].empty() ? "healed" : r.error[std::size_t(m)]));
      REQUIRE(r.error[std::size_t(m)].empty());
      const std::string parted = heal_test_parted(r.after[std::size_t(m)], r.before[std::size_t(c.source)]);
      INFO("healed, then stepped beside the source, it parted from it" << parted);
      CHECK(parted.empty());
    }
  }
}
TEST_CASE("heal: the source and every member in step are unchanged and nothing reaches them", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    for (int m = 0; m < c.n; ++m) {
      if (std::count(c.behind.begin(), c.behind.end(), m)) continue;
      const MemberState& a = r.after[std::size_t(m)];
      const MemberState& b = r.before[std::size_t(m)];
      INFO(c.n << " members, source " << c.source << ", member " << m << (m == c.source ? " (the source)" : " (in step)")
                << ": " << (r.error[std::size_t(m)].empty() ? "returned" : r.error[std::size_t(m)]) << ", "
                << r.reached_text(m) << (heal_test_same(a, b) ? ", unchanged" : ", its state changed"));
      CHECK(r.error[std::size_t(m)].empty());
      CHECK(r.reached(m) == 0);
      CHECK(heal_test_same(a, b));
    }
  }
}

TEST_CASE("heal: nothing reaches a member behind that it can do without", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    const HealRun grown = run_heal(c.n, c.source, c.behind, 10 * kHealTestPsi);
    for (int m : c.behind) {
      INFO(c.n << " members, member " << m << " behind: " << r.reached_text(m) << "; with every last gradient "
                << 10 * kHealTestPsi << " floats long instead of " << kHealTestPsi << ": " << grown.reached_text(m)
                << (r.error[std::size_t(m)].empty() ? "" : " — " + r.error[std::size_t(m)]));
      CHECK(r.error[std::size_t(m)].empty());
      CHECK(r.reached(m) > 0);
      CHECK(grown.reached(m) == r.reached(m));
    }
  }
}

TEST_CASE("heal: each member behind receives its copy once, whoever else heals", "[ch16][hole:heal]") {
  for (const HealCase& c : kHealCases) {
    const HealRun r = run_heal(c.n, c.source, c.behind);
    for (int m : c.behind) {
      const HealRun alone = run_heal(c.n, c.source, {m});
      INFO(c.n << " members, source " << c.source << ", member " << m << " behind: " << r.reached_text(m) << " with "
                << c.behind.size() << " behind; alone behind: " << alone.reached_text(m) << "; the first behind, "
                << c.behind.front() << ": " << r.reached_text(c.behind.front())
                << (r.error[std::size_t(m)].empty() ? "" : " — " + r.error[std::size_t(m)]));
      CHECK(r.error[std::size_t(m)].empty());
      CHECK(alone.error[std::size_t(m)].empty());
      CHECK(r.reached(m) > 0);
      CHECK(r.reached(m) == alone.reached(m));
      CHECK(r.reached(m) == r.reached(c.behind.front()));
    }
  }
}

TEST_CASE("heal: every member keeps what is its own", "[ch16][hole:heal]") {
  const HealRun r = run_heal(4, 1, {0, 3});
  for (int m = 0; m < 4; ++m) {
    const MemberState &a = r.after[std::size_t(m)], &b = r.before[std::size_t(m)];
    INFO("member " << m << " was world rank " << b.world_rank << " with a last step of " << b.step_seconds
                   << " s, and is now world rank " << a.world_rank << " with " << a.step_seconds << " s"
                   << (r.error[std::size_t(m)].empty() ? "" : " — " + r.error[std::size_t(m)]));
    CHECK(r.error[std::size_t(m)].empty());
    CHECK(a.world_rank == b.world_rank);
    CHECK(a.step_seconds == b.step_seconds);
  }
}

TEST_CASE("heal: with nobody behind, nothing moves", "[ch16][hole:heal]") {
  const HealRun r = run_heal(3, 0, {});
  for (int m = 0; m < 3; ++m) {
    INFO("member " << m << ": " << (r.error[std::size_t(m)].empty() ? "returned" : r.error[std::size_t(m)]) << ", "
                   << r.reached_text(m));
    CHECK(r.error[std::size_t(m)].empty());
    CHECK(r.reached(m) == 0);
    CHECK(heal_test_same(r.after[std::size_t(m)], r.before[std::size_t(m)]));
  }
}
