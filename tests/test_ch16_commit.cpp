// test_ch16_commit.cpp — your hole, ch16::commit_step, against its law: a
// step commits on every member of the group or on none, and a committed step
// is momentum SGD applied once (the formula written out here, not the
// chapter's apply_momentum).
#include "support/catch.h"

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ch16.h"
#include "dpt/quorum_group.h"

using namespace dpt;
using namespace dpt::ch16;

namespace {

constexpr float kLr = 0.5f;

// Member m's replica before the step, and the summed gradient every member holds.
Replica replica_of(int m) { return Replica{{1.0f + float(m), -2.0f, 0.25f}, {0.5f, 0.0f, -1.0f}}; }
const std::vector<float> kGrad = {0.1f, -0.2f, 0.4f};

struct Outcome {
  std::string result;  // "true", "false", or the exception's message
  Replica replica;
};

// Runs commit_step on every member of a fresh group of `n`, each on its own
// thread; `fine(m)` is member m's vote; member `absent` (if >= 0) never calls
// it and revokes the group instead (a crash).
std::vector<Outcome> run_group(int n, const std::function<bool(int)>& fine, int absent = -1) {
  auto group = make_threads_group(n, 20.0);
  std::vector<Outcome> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m)
    threads.emplace_back([&, m] {
      out[std::size_t(m)].replica = replica_of(m);
      if (m == absent) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        revoke(*group[std::size_t(m)], "member " + std::to_string(m) + " crashed");
        out[std::size_t(m)].result = "absent";
        return;
      }
      try {
        const bool ok = commit_step(*group[std::size_t(m)], out[std::size_t(m)].replica, kGrad, kLr, fine(m));
        out[std::size_t(m)].result = ok ? "true" : "false";
      } catch (const PeerFailed& e) {
        out[std::size_t(m)].result = std::string("PeerFailed: ") + e.what();
      } catch (const std::exception& e) {  // the hole unwritten, or any other error: its words, in the check
        out[std::size_t(m)].result = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

bool same_bits(const Replica& a, const Replica& b) { return a.params == b.params && a.momentum == b.momentum; }

}  // namespace

TEST_CASE("commit_step: every member fine, every member commits momentum SGD once", "[ch16][hole:commit_step]") {
  for (int n : {1, 2, 4}) {
    auto out = run_group(n, [](int) { return true; });
    for (int m = 0; m < n; ++m) {
      INFO(n << " members, member " << m << ": with every member fine, the step commits on all, each applying "
              "v <- 0.9 v + g, w <- w - lr v once");
      CHECK(out[std::size_t(m)].result == "true");
      const Replica before = replica_of(m);
      for (std::size_t i = 0; i < kGrad.size(); ++i) {
        const float v = 0.9f * before.momentum[i] + kGrad[i];
        CHECK(out[std::size_t(m)].replica.momentum[i] == v);
        CHECK(out[std::size_t(m)].replica.params[i] == before.params[i] - kLr * v);
      }
    }
  }
}

TEST_CASE("commit_step: one member says no, no member changes anything", "[ch16][hole:commit_step]") {
  for (int no : {0, 2}) {
    auto out = run_group(3, [no](int m) { return m != no; });
    for (int m = 0; m < 3; ++m) {
      INFO("member " << no << " passed fine = false: every member must return false and leave its replica as it was "
                        "(member " << m << ")");
      CHECK(out[std::size_t(m)].result == "false");
      CHECK(same_bits(out[std::size_t(m)].replica, replica_of(m)));
    }
  }
}

TEST_CASE("commit_step: a member that crashed: the others' error passes through, no replica changed", "[ch16][hole:commit_step]") {
  auto out = run_group(3, [](int) { return true; }, 1);
  for (int m : {0, 2}) {
    INFO("member 1 never reached commit_step (its group was revoked): member " << m << " must see the group's "
         "PeerFailed, and its replica must be as it was: a step is applied on all members or on none");
    INFO("member " << m << "'s commit_step ended with: " << out[std::size_t(m)].result);
    CHECK(out[std::size_t(m)].result.find("PeerFailed") == 0);
    CHECK(out[std::size_t(m)].result.find("member 1 crashed") != std::string::npos);
    CHECK(same_bits(out[std::size_t(m)].replica, replica_of(m)));
  }
}
