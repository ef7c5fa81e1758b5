// test_ch08.cpp — chapter 08's two phase holes, halving_reduce_scatter and
// doubling_all_gather: who ends with which block, each contribution once,
// and the pattern (log2 p steps, each a pairing: one partner who has this
// member as its partner at the same step, a new one each step; the size
// halving or doubling). Oracles share no code with the algorithms: contributions 8^r
// read back in base 8 (which ranks reached an element, and how often) and
// the messages a watching communicator saw (partners, sizes).
//
// Elsewhere: the two all-reduce holes in test_ch08_all_reduce.cpp; the
// provided algorithms, the clock and the program in test_ch08_chapter.cpp;
// the threads-world runner in support/ch08_run.h.
#include "support/catch.h"
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ch08.h"
#include "support/ch08_run.h"
#include "support/contributions.h"

using namespace dpt;
using namespace dpt::ch08;
using dpt_test::input;
using dpt_test::log2_of;
using dpt_test::Fill;
using dpt_test::Run;
using dpt_test::run;

namespace {
// Rank r contributes 8^r at every element (support/contributions.h): a sum
// read in base 8 says how often each rank's contribution reached it.
using dpt_test::contribution_everywhere;
using dpt_test::all_once;
using dpt_test::contributions;

// Whom `member` sent to at its step `k` (-1: it made no such call).
int partner_at(const Run& r, int member, std::size_t k) {
  const auto& seen = r.messages[std::size_t(member)];
  return k < seen.size() ? seen[k].dst : -1;
}
}  // namespace

// ----------------------------------------------------------------------------
// halving_reduce_scatter

TEST_CASE("halving_reduce_scatter: member r ends with block r's sum, every contribution once", "[ch08]") {
  for (int p : {1, 2, 4, 8}) {
    for (int64_t count : {int64_t(p), int64_t(10), int64_t(37)}) {  // one float per block; unequal blocks
      Run r = run(p, count, contribution_everywhere, [](Communicator& c, std::vector<float>& d) {
        halving_reduce_scatter(Team(c), d.data(), int64_t(d.size()));
      });
      for (int m = 0; m < p; ++m) {
        Range block = block_range(count, p, m, m + 1);
        for (int64_t i = block.begin; i < block.end; ++i) {
          if (r.data[std::size_t(m)][std::size_t(i)] == all_once(p)) continue;
          std::string instead;  // a block this member did finish, if any
          for (int b = 0; b < p && instead.empty(); ++b) {
            Range other = block_range(count, p, b, b + 1);
            if (other.size() > 0 && r.data[std::size_t(m)][std::size_t(other.begin)] == all_once(p))
              instead = " (it finished block " + std::to_string(b) + " instead)";
          }
          FAIL(p << " members, " << count << " floats: after the reduce-scatter member " << m << "'s block " << m
                 << " holds " << contributions(r.data[std::size_t(m)][std::size_t(i)], p) << instead
                 << ". Member r must end holding block r summed over every member, each once: which partner comes "
                    "first, and which half a member keeps, decide which block it ends with.");
        }
      }
    }
  }
}

TEST_CASE("halving_reduce_scatter: log2 p steps, each a pairing with a new partner, half as much each step",
          "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    const int64_t count = 16 * p;  // every half divides evenly
    Run r = run(p, count, input, [](Communicator& c, std::vector<float>& d) {
      halving_reduce_scatter(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      const auto& seen = r.messages[std::size_t(m)];
      INFO(p << " members: member " << m << " made " << seen.size() << " calls");
      INFO("halving takes log2 p = " << log2_of(p) << " steps of one sendrecv each");
      REQUIRE(int(seen.size()) == log2_of(p));
      std::vector<int> partners;
      for (std::size_t k = 0; k < seen.size(); ++k) {
        const Message& msg = seen[k];
        INFO(p << " members: member " << m << " at step " << k << ": " << msg.call << " to " << msg.dst << " ("
               << msg.send_count << " floats), from " << msg.src << " (" << msg.recv_count << " floats)");
        INFO("each step is one sendrecv with one partner, who at the same step has this member as its partner; "
             "a different partner each step");
        REQUIRE(msg.dst >= 0);
        REQUIRE(msg.dst == msg.src);
        REQUIRE(msg.dst != m);
        REQUIRE(std::find(partners.begin(), partners.end(), msg.dst) == partners.end());
        partners.push_back(msg.dst);
        REQUIRE(partner_at(r, msg.dst, k) == m);
        INFO("a member gives up half of what it holds at each step: count/2, then count/4, … (" << count << " floats)");
        CHECK(msg.send_count == (count >> (k + 1)));
        CHECK(msg.recv_count == (count >> (k + 1)));
      }
    }
  }
}

// ----------------------------------------------------------------------------
// doubling_all_gather

TEST_CASE("doubling_all_gather: every member ends with every member's final block, copied", "[ch08]") {
  for (int p : {1, 2, 4, 8}) {
    for (int64_t count : {int64_t(p), int64_t(37)}) {
      // Member r's block r holds 100·(r+1) + i (final); elsewhere 10000·(rank+1) + i (stale).
      auto owner = [&](int64_t i) {
        for (int b = 0; b < p; ++b)
          if (i < block_range(count, p, b, b + 1).end) return b;
        return p - 1;
      };
      Fill fill = [&](int rank, int64_t i) {
        return owner(i) == rank ? float(100 * (rank + 1) + i) : float(10000 * (rank + 1) + i);
      };
      Run r = run(p, count, fill, [](Communicator& c, std::vector<float>& d) {
        doubling_all_gather(Team(c), d.data(), int64_t(d.size()));
      });
      for (int m = 0; m < p; ++m)
        for (int64_t i = 0; i < count; ++i) {
          float got = r.data[std::size_t(m)][std::size_t(i)], want = float(100 * (owner(i) + 1) + i),
                stale = float(10000 * (m + 1) + i);
          if (got == want) continue;
          FAIL(p << " members, " << count << " floats: after the all-gather member " << m << "'s element " << i
                 << " (block " << owner(i) << ") is " << got << ", its owner's final value is " << want
                 << (got == stale ? " (it never arrived: each step a member sends all it holds final)"
                     : got == want + stale ? " (it was added: the all-gather copies, it does not add)"
                                           : " (another block landed there)"));
        }
    }
  }
}

TEST_CASE("doubling_all_gather: log2 p steps, each a pairing with a new partner, twice as much each step",
          "[ch08]") {
  for (int p : {2, 4, 8, 16}) {
    const int64_t count = 16 * p;
    Run r = run(p, count, input, [](Communicator& c, std::vector<float>& d) {
      doubling_all_gather(Team(c), d.data(), int64_t(d.size()));
    });
    for (int m = 0; m < p; ++m) {
      const auto& seen = r.messages[std::size_t(m)];
      INFO(p << " members: member " << m << " made " << seen.size() << " calls; doubling takes log2 p = "
             << log2_of(p) << " steps of one sendrecv each");
      REQUIRE(int(seen.size()) == log2_of(p));
      std::vector<int> partners;
      for (std::size_t k = 0; k < seen.size(); ++k) {
        const Message& msg = seen[k];
        INFO(p << " members: member " << m << " at step " << k << ": to " << msg.dst << " (" << msg.send_count
               << " floats), from " << msg.src);
        INFO("each step one partner, who at the same step has this member as its partner, a new one each step; "
             "a member sends all it holds final: count/p, then twice that, …");
        REQUIRE(msg.dst == msg.src);
        REQUIRE(msg.dst != m);
        REQUIRE(std::find(partners.begin(), partners.end(), msg.dst) == partners.end());
        partners.push_back(msg.dst);
        REQUIRE(partner_at(r, msg.dst, k) == m);
        CHECK(msg.send_count == (count / p) << k);
      }
    }
  }
}
