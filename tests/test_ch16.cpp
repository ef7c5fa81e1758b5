// test_ch16.cpp — chapter 16's machinery, each piece against its law: a
// revoked group stops a call in flight at once, naming the reason; the
// lighthouse keeps a quorum's id while its members stay, never reuses one, and a rank
// that does not ask is left out after the bounded wait; the ledger's
// exactly-once check refuses a sample seen twice.
#include "support/catch.h"

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "dpt/quorum_group.h"
#include "lighthouse.h"
#include "replay.h"

using namespace dpt;
using namespace dpt::ch16;

namespace {

double seconds_of(const std::function<void()>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("revoke: a member's call in flight throws PeerFailed with the reason, not a timeout", "[ch16]") {
  auto group = make_threads_group(3, 30.0);  // a timeout far above what the test may take
  std::vector<std::string> caught(2);
  std::vector<std::thread> waiting;
  const double took = seconds_of([&] {
    for (int m = 0; m < 2; ++m)
      waiting.emplace_back([&, m] {
        float x = 1;
        try {
          group[std::size_t(m)]->all_reduce(&x, 1, ReduceOp::Sum);
        } catch (const PeerFailed& e) {
          caught[std::size_t(m)] = e.what();
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    revoke(*group[2], "world rank 7 crashed");
    for (auto& t : waiting) t.join();
  });
  for (const std::string& message : caught) CHECK(message.find("world rank 7 crashed") != std::string::npos);
  CHECK(took < 20.0);  // ended by the revoke, not by the 30 s bound
}

TEST_CASE("lighthouse: one id per quorum, kept while its members are, never reused", "[ch16][hole:decide_quorum]") {
  Lighthouse lighthouse(3, {0, 1, 2}, 5.0, 5.0);
  std::vector<std::vector<Quorum>> seen(3);
  auto ask = [&](const std::vector<int>& ranks, int64_t slot) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(3);  // an error in the lighthouse (decide_quorum unwritten): rethrown here
    for (int r : ranks)
      threads.emplace_back([&, r] {
        try {
          seen[std::size_t(r)].push_back(lighthouse.quorum(r, slot, slot));
        } catch (...) {
          errors[std::size_t(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  };
  ask({0, 1, 2}, 0);
  ask({0, 1, 2}, 1);             // the same members: the same id
  lighthouse.leave(2, "crashed");
  ask({0, 1}, 2);                // one fewer: a new id, a new group of 2
  lighthouse.expect(2, 3);
  ask({0, 1, 2}, 3);             // back: a new id again
  const std::vector<Quorum>& q0 = seen[0];
  REQUIRE(q0.size() == 4);
  {
    INFO("steps 0 and 1 had the same members {0, 1, 2}: one quorum, so one id");
    CHECK(q0[0].id == q0[1].id);
  }
  {
    INFO("rank 2 left at step 2, came back at step 3: each change of members is a new quorum, a new id");
    CHECK(q0[2].id != q0[1].id);
    CHECK(q0[3].id != q0[2].id);
  }
  INFO("rank 2 back: the members of the first quorum, but a new quorum, whose messages must not be taken for the first's");
  CHECK(q0[3].id != q0[0].id);
  CHECK(q0[2].members == std::vector<int>{0, 1});
  CHECK(q0[2].comm->size() == 2);
  CHECK(q0[3].members == std::vector<int>{0, 1, 2});
  for (int r : {0, 1}) CHECK(seen[std::size_t(r)][2].comm != seen[std::size_t(r)][1].comm);  // a new group with the change
  for (int slot = 0; slot < 4; ++slot) CHECK(seen[1][std::size_t(slot)].id == q0[std::size_t(slot)].id);  // one answer for all
}

TEST_CASE("lighthouse: a rank that does not ask is left out after the wait, and a late one is told", "[ch16][hole:decide_quorum]") {
  Lighthouse lighthouse(3, {0, 1, 2}, 1.0, 5.0);  // a wait far above two threads' start apart
  std::vector<Quorum> q(2);
  std::vector<std::exception_ptr> errors(2);
  auto ask = [&](int r) {
    try {
      q[std::size_t(r)] = lighthouse.quorum(r, 0, 0);
    } catch (...) {  // an error in the lighthouse (decide_quorum unwritten): rethrown here
      errors[std::size_t(r)] = std::current_exception();
    }
  };
  std::thread a(ask, 0), b(ask, 1);
  a.join(), b.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  CHECK(q[0].members == std::vector<int>{0, 1});
  CHECK(q[0].change.find("rank 2 did not ask") != std::string::npos);
  CHECK_FALSE(lighthouse.quorum(2, 0, 0).member);
}

TEST_CASE("ledger: the exactly-once check counts epochs and refuses a repeat", "[ch16]") {
  std::vector<LedgerEntry> ledger{{0, 0, 2, 0.1f, {3, 1}, {0, 1}}, {1, 0, 2, 0.1f, {0, 2}, {0, 1}}, {2, 1, 1, 0.1f, {2}, {0}}};
  const ExactlyOnce once = check_exactly_once({ledger[0], ledger[1]}, 4);
  CHECK(once.ok);
  CHECK(once.consumed == 4);
  const ExactlyOnce next = check_exactly_once(ledger, 4);  // sample 2 again, but in the next epoch
  CHECK(next.ok);
  const ExactlyOnce twice = check_exactly_once({ledger[0], ledger[2], ledger[2]}, 4);  // 2 twice in epoch 0
  CHECK_FALSE(twice.ok);
  CHECK(twice.seen.find("sample 2 came a second time") != std::string::npos);
}
