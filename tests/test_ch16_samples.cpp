// test_ch16_samples.cpp — your hole, ch16::assign_samples, against its laws
// (ch16.h): shares that differ by at most one, the step's samples from the
// stream where the cursor stands, and across shrinks and joins, under both
// batch policies, every sample of every epoch exactly once.
#include "support/catch.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "ch16.h"
#include "elastic_rank.h"

using namespace dpt::ch16;

namespace {

constexpr uint64_t kSeed = 7;

std::vector<int64_t> concatenated(const StepSamples& s) {
  std::vector<int64_t> all;
  for (const auto& shard : s.shards) all.insert(all.end(), shard.begin(), shard.end());
  return all;
}

}  // namespace

TEST_CASE("assign_samples: one share per member, sizes within one, the step's global batch in all",
          "[ch16][hole:assign_samples]") {
  for (int members = 1; members <= 5; ++members)
    for (int64_t global : {5, 7, 32, 33}) {
      const StepSamples s = assign_samples(13, members, global, 50, kSeed);
      INFO(members << " members, a global batch of " << global);
      REQUIRE(s.shards.size() == std::size_t(members));
      std::size_t lo = s.shards[0].size(), hi = lo, total = 0;
      for (const auto& shard : s.shards) lo = std::min(lo, shard.size()), hi = std::max(hi, shard.size()), total += shard.size();
      INFO("share sizes from " << lo << " to " << hi << ", " << total << " in all");
      CHECK(hi - lo <= 1);
      CHECK(total == std::size_t(global));
    }
}

TEST_CASE("assign_samples: the step's samples are the stream's, from the cursor on, and the same every call",
          "[ch16][hole:assign_samples]") {
  for (int64_t cursor : {0, 45, 97}) {  // mid-epoch and across an epoch's end (50 samples)
    const StepSamples s = assign_samples(cursor, 3, 10, 50, kSeed);
    std::vector<int64_t> got = concatenated(s), stream;
    for (int64_t p = cursor; p < cursor + 10; ++p) stream.push_back(sample_at(p, 50, kSeed));
    std::sort(got.begin(), got.end());
    std::sort(stream.begin(), stream.end());
    INFO("at cursor " << cursor << ", 3 members, 10 samples: the samples must be the stream's (sample_at) next ones");
    CHECK(got == stream);
    const StepSamples again = assign_samples(cursor, 3, 10, 50, kSeed);
    INFO("every member computes the assignment for itself: the same arguments must give the same shards and cursor");
    CHECK(again.shards == s.shards);
    CHECK(again.next_cursor == s.next_cursor);
  }
}

TEST_CASE("assign_samples: across shrinks and joins, both policies, every sample of every epoch once",
          "[ch16][hole:assign_samples]") {
  const int64_t n_samples = 40, b = 4, world = 4;
  const std::vector<int> members = {4, 4, 3, 3, 3, 2, 4, 4, 1, 3, 4, 4, 2, 2, 4, 3, 4, 4, 3, 4};
  for (bool keep_global : {true, false}) {
    int64_t cursor = 0;
    std::vector<int64_t> consumed;
    std::ostringstream run;
    for (int n : members) {
      const int64_t global = keep_global ? b * world : b * n;
      const StepSamples s = assign_samples(cursor, n, global, n_samples, kSeed);
      const std::vector<int64_t> step = concatenated(s);
      consumed.insert(consumed.end(), step.begin(), step.end());
      run << " [" << n << " members at cursor " << cursor << ": " << step.size() << " samples]";
      cursor = s.next_cursor;
    }
    INFO((keep_global ? "--keep global" : "--keep per-rank") << ", each step from the last one's next_cursor:" << run.str());
    for (std::size_t epoch = 0; epoch * std::size_t(n_samples) < consumed.size(); ++epoch) {
      const auto begin = consumed.begin() + std::ptrdiff_t(epoch * std::size_t(n_samples));
      const auto end = std::min(consumed.end(), begin + n_samples);
      std::vector<int> count(std::size_t(n_samples), 0);
      for (auto it = begin; it != end; ++it) {
        REQUIRE(*it >= 0);
        REQUIRE(*it < n_samples);
        ++count[std::size_t(*it)];
      }
      const bool whole = end - begin == n_samples;
      for (int64_t i = 0; i < n_samples; ++i) {
        INFO("epoch " << epoch << (whole ? "" : " (the last, partial)") << ": sample " << i << " came "
                      << count[std::size_t(i)] << " times; every sample of an epoch comes once, none twice");
        CHECK(count[std::size_t(i)] <= 1);
        if (whole) CHECK(count[std::size_t(i)] == 1);
      }
    }
  }
}
