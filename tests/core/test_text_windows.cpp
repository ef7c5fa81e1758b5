// test_text_windows.cpp — chapter 14's windows: the formula against a table
// written by hand, replicas partitioning the global batch, the seeded
// shuffle, the held-out split's sizes and evaluation's tiles.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dpt/text_windows.h"

using namespace dpt;
using Starts = std::vector<int64_t>;

TEST_CASE("text windows: step s, window g starts at ((s*G + g)*T) mod (N - T - 1)", "[text]") {
  // N = 20 tokens, T = 3, G = 4: the modulus is 16. Worked by hand:
  // step 0: 0, 3, 6, 9;  step 1: 12, 15, 18-16, 21-16;  step 2: 24-16, 27-16, 30-16, 33-32.
  WindowSampler sampler(20, 3, 4, /*shuffle*/ false, 42);
  CHECK(sampler.starts(0) == Starts{0, 3, 6, 9});
  CHECK(sampler.starts(1) == Starts{12, 15, 2, 5});
  CHECK(sampler.starts(2) == Starts{8, 11, 14, 1});
  // A long run's step: s*G*T is past 2^63 here; exact 128-bit arithmetic is the oracle.
  const int64_t N = 4137850, T = 64, G = 48, s = int64_t(1) << 52;
  WindowSampler big(N, T, G, false, 0);
  Starts got = big.starts(s);
  for (int64_t g = 0; g < G; ++g) {
    __int128 expected = ((__int128(s) * G + g) * T) % (N - T - 1);
    CHECK(got[std::size_t(g)] == int64_t(expected));
  }
}

TEST_CASE("text windows: a window's targets are its inputs shifted by one token", "[text]") {
  std::vector<int64_t> tokens(12);
  std::iota(tokens.begin(), tokens.end(), 100);  // token i is 100 + i
  TokenBatch batch = window_batch(tokens, {0, 7, 8}, 3);
  CHECK(batch.windows == 3);
  CHECK(batch.context == 3);
  CHECK(batch.inputs == Starts{100, 101, 102, 107, 108, 109, 108, 109, 110});
  CHECK(batch.targets == Starts{101, 102, 103, 108, 109, 110, 109, 110, 111});
  CHECK_THROWS_WITH(window_batch(tokens, {9}, 3), contains_text("does not fit in 12 tokens"));
}

TEST_CASE("text windows: D replicas of B windows take exactly one device's G = D*B windows", "[text]") {
  const int64_t N = 1000, T = 16, B = 3;
  for (bool shuffle : {false, true}) {
    for (int D : {1, 2, 4}) {
      WindowSampler one_device(N, T, D * B, shuffle, 7);  // what one device would take
      for (int64_t step : {0, 1, 5, 123}) {
        Starts together;
        for (int d = 0; d < D; ++d) {
          WindowSampler replica(N, T, D * B, shuffle, 7);  // each replica on its own: no communication
          Starts mine = replica.replica_starts(step, d, D);
          REQUIRE(int64_t(mine.size()) == B);
          together.insert(together.end(), mine.begin(), mine.end());  // replica d's windows are g in [d*B, (d+1)*B)
        }
        INFO("shuffle " << shuffle << ", " << D << " replicas, step " << step);
        CHECK(together == one_device.starts(step));
      }
    }
  }
  WindowSampler sampler(N, T, 6, false, 7);
  CHECK_THROWS_WITH(sampler.replica_starts(0, 0, 4), contains_text("does not split evenly"));
}

TEST_CASE("text windows: shuffled starts are seeded, in range, any step drawn alone", "[text]") {
  const int64_t N = 5000, T = 32, G = 64;
  WindowSampler a(N, T, G, true, 1), b(N, T, G, true, 1), other(N, T, G, true, 2);
  Starts later = a.starts(9);
  for (int64_t s = 0; s < 9; ++s) b.starts(s);  // drawing earlier steps first changes nothing
  CHECK(b.starts(9) == later);
  CHECK(other.starts(9) != later);
  CHECK(a.starts(10) != later);
  // Uniform on [0, N - T - 1): 64,000 draws; the mean is within 5 standard
  // errors of (M - 1)/2, and both ends of the range are reached.
  const int64_t M = N - T - 1;
  double sum = 0;
  int64_t lowest = M, highest = -1, draws = 0;
  for (int64_t s = 0; s < 1000; ++s)
    for (int64_t start : a.starts(s)) {
      REQUIRE(start >= 0);
      REQUIRE(start < M);
      sum += double(start);
      lowest = std::min(lowest, start);
      highest = std::max(highest, start);
      ++draws;
    }
  double standard_error = double(M) / std::sqrt(12.0 * double(draws));
  CHECK(std::abs(sum / double(draws) - double(M - 1) / 2) < 5 * standard_error);
  CHECK(lowest < 10);
  CHECK(highest > M - 10);
}

TEST_CASE("text windows: the last tenth is held out, as nanoGPT's int(n * 0.9)", "[text]") {
  struct Case { int64_t n, train; };
  // Worked by hand: 9n/10 rounded down.
  for (Case c : {Case{10, 9}, Case{19, 17}, Case{1000, 900}, Case{4137850, 3724065}}) {
    std::vector<int64_t> tokens(std::size_t(c.n));
    std::iota(tokens.begin(), tokens.end(), 0);
    TextSplit split = split_held_out(tokens);
    CHECK(int64_t(split.train.size()) == c.train);
    CHECK(int64_t(split.held_out.size()) == c.n - c.train);
    CHECK(split.train.front() == 0);
    CHECK(split.held_out.front() == c.train);  // the held-out part is the text after the training part
    CHECK(split.held_out.back() == c.n - 1);
  }
}

TEST_CASE("text windows: evaluation tiles the held-out text, or spreads fewer windows over it", "[text]") {
  // N = 20, T = 3: tiles at 0, 3, …, 15 (the last one's targets end at token 18).
  CHECK(evaluation_starts(20, 3) == Starts{0, 3, 6, 9, 12, 15});
  CHECK(evaluation_starts(20, 3, 100) == Starts{0, 3, 6, 9, 12, 15});
  CHECK(evaluation_starts(20, 3, 3) == Starts{0, 6, 12});  // tiles 0, 2, 4 of 6
  for (int64_t N : {22, 100, 4097}) {
    for (int64_t T : {1, 5, 20}) {
      for (int64_t count : {0, 1, 7}) {
        Starts starts = evaluation_starts(N, T, count);
        INFO("N " << N << ", T " << T << ", count " << count);
        REQUIRE(!starts.empty());
        for (std::size_t k = 0; k < starts.size(); ++k) {
          CHECK(starts[k] + T + 1 <= N);                       // the window fits
          if (k > 0) CHECK(starts[k] - starts[k - 1] >= T);  // targets never predicted twice
        }
        if (count == 0) CHECK(N - 1 - (starts.back() + T) < T);  // all tiles: fewer than T tokens left unpredicted
      }
    }
  }
}

TEST_CASE("text windows: a split shorter than T + 2 tokens is refused with a sentence", "[text]") {
  CHECK_THROWS_WITH(WindowSampler(65, 64, 1, false, 0), contains_text("need at least 66"));
  CHECK_THROWS_WITH(evaluation_starts(65, 64), contains_text("need at least 66"));
  WindowSampler tight(66, 64, 3, false, 0);  // one start only: 0
  CHECK(tight.starts(5) == Starts{0, 0, 0});
}
