// test_ch09_ssp.cpp — chapter 09's stale-synchronous bound, ssp_must_wait:
// a table of cases argued in place, and a straggler run in which the fastest
// worker finishes at most s + 1 steps ahead, and gets there.
#include "support/catch.h"
#include <algorithm>
#include <vector>

#include "ch09.h"

using namespace dpt;
using namespace dpt::ch09;

// ----------------------------------------------------------------------------
// ssp_must_wait

TEST_CASE("ssp_must_wait: waits exactly when starting would put it more than s steps ahead of the slowest",
          "[ch09]") {
  struct Case {
    std::vector<int64_t> completed;
    int worker, s;
    bool wait;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{0, 0}, 0, 0, false, "s = 0, nobody has finished: step 0 may start"},
      {{1, 0}, 0, 0, true, "s = 0: worker 0 finished step 0, worker 1 has not; lockstep waits"},
      {{1, 0}, 1, 0, false, "the slowest worker never waits"},
      {{1, 1}, 0, 0, false, "s = 0: everyone finished step 0, step 1 may start"},
      {{2, 0, 1}, 0, 1, true, "s = 1: starting step 2 with the slowest at 0 done is two ahead"},
      {{1, 0, 1}, 0, 1, false, "s = 1: starting step 1 with the slowest at 0 done is one ahead: allowed"},
      {{3, 1, 5}, 0, 2, false, "s = 2: 3 done vs the slowest's 1: two ahead, allowed"},
      {{3, 1, 5}, 2, 2, true, "s = 2: 5 done vs the slowest's 1: four ahead"},
      {{4, 1, 5}, 0, 2, true, "s = 2: 4 done vs 1: three ahead"},
      {{7, 7, 7}, 1, 0, false, "all level"},
      {{9, 2}, 0, 7, false, "s = 7: seven ahead, allowed"},
      {{10, 2}, 0, 7, true, "s = 7: eight ahead"}};
  for (const Case& c : cases) {
    bool got = ssp_must_wait(c.completed, c.worker, c.s);
    std::string done;
    for (int64_t x : c.completed) done += (done.empty() ? "" : ", ") + std::to_string(x);
    INFO("steps finished {" << done << "}, worker " << c.worker << ", max staleness " << c.s << ": must wait? "
         << (got ? "yes" : "no") << ", expected " << (c.wait ? "yes" : "no") << " — " << c.why);
    CHECK(got == c.wait);
  }
}

TEST_CASE("ssp_must_wait: with a straggler the fastest finishes at most s + 1 steps ahead, and gets there",
          "[ch09]") {
  for (int s : {0, 1, 2, 3}) {
    std::vector<int> order;
    try {
      order = arrival_order(Mode::Ssp, {1, 1, 4}, 60, s);  // worker 2 takes 4 times as long
    } catch (const NotImplemented&) {
      throw;
    } catch (const Error& e) {
      FAIL("max staleness " << s << ": " << e.what());
    }
    std::vector<int64_t> completed(3, 0);
    int64_t lead = 0;
    for (int w : order) {
      ++completed[std::size_t(w)];
      lead = std::max(lead, *std::max_element(completed.begin(), completed.end()) -
                                *std::min_element(completed.begin(), completed.end()));
    }
    INFO("max staleness " << s << ", a worker 4x slower: the fastest finished up to " << lead << " steps more than "
         "the slowest. It may start a step while at most s ahead, and finishing it takes it to s + 1 = " << s + 1
         << ": no more (the bound), and no less (no waiting the bound does not require)");
    CHECK(lead == s + 1);
  }
}
