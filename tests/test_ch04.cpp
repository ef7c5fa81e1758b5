// test_ch04.cpp — chapter 04's ring_chunk against its postconditions: the
// chunks tile the vector in order, their sizes differ by at most one with the
// larger first, a chunk of a huge vector comes in O(1), and a chunk that does
// not exist is an error that says so.
//
// The ring's results are in test_ch04_ring.cpp, its steps and traffic in
// test_ch04_steps.cpp, the chapter's program in test_ch04_chapter.cpp.
#include "support/catch.h"
#include <chrono>
#include <tuple>
#include <vector>

#include "ch04.h"

using namespace dpt;

TEST_CASE("ring_chunk: the chunks tile the vector in order, no element lost or shared", "[ch04]") {
  for (int n = 1; n <= 9; ++n)
    for (int64_t count : {0, 1, 2, 3, 7, 10, 64, 1001}) {
      int64_t expected_begin = 0;  // where the next chunk must begin
      for (int i = 0; i < n; ++i) {
        Range c = ch04::ring_chunk(count, n, i);
        INFO(count << " elements in " << n << " chunks: chunk " << i << " is [" << c.begin << ", " << c.end << ")");
        if (c.begin != expected_begin)
          FAIL((i == 0 ? "chunk 0 must begin at 0" : "chunk " + std::to_string(i) + " must begin where chunk " +
                std::to_string(i - 1) + " ends, at " + std::to_string(expected_begin)) +
               (c.begin > expected_begin ? ": the elements in between belong to no chunk"
                                         : ": the elements in between are in two chunks"));
        if (c.end < c.begin) FAIL("a chunk's end comes before its begin: its size is negative");
        if (c.end > count)
          FAIL("the chunk runs past the vector's end (" << count << " elements): the ring would read and write "
               "floats that are not there. Sizes rounded up leave too little for the last chunks.");
        expected_begin = c.end;
      }
      if (expected_begin != count)
        FAIL(count << " elements in " << n << " chunks: the last chunk ends at " << expected_begin << ", not at "
             << count << ": the last " << count - expected_begin << " elements belong to no chunk (the remainder "
             "count mod n must go somewhere: sizes rounded down lose it)");
    }
}

TEST_CASE("ring_chunk: sizes differ by at most one, the larger chunks first", "[ch04]") {
  for (int n = 1; n <= 9; ++n)
    for (int64_t count : {0, 1, 2, 3, 7, 10, 64, 1001}) {
      int64_t smallest = count, largest = 0;
      for (int i = 0; i < n; ++i) {
        int64_t size = ch04::ring_chunk(count, n, i).size();
        smallest = std::min(smallest, size), largest = std::max(largest, size);
        if (i > 0 && size > ch04::ring_chunk(count, n, i - 1).size())
          FAIL(count << " elements in " << n << " chunks: chunk " << i << " has " << size << " elements, chunk "
               << i - 1 << " only " << ch04::ring_chunk(count, n, i - 1).size()
               << ": sizes must never grow with i (the extra elements go to the first chunks, not the last)");
      }
      if (largest - smallest > 1)
        FAIL(count << " elements in " << n << " chunks: sizes from " << smallest << " to " << largest
             << ": they must differ by at most one, so that no rank of the ring waits for a chunk much larger "
                "than the others");
    }
}

TEST_CASE("ring_chunk: a chunk of a huge vector comes at once (O(1), no walk over earlier chunks)", "[ch04]") {
  // n near 2^31 and 2^62 elements: a loop over the chunks before i takes
  // seconds per call, integer arithmetic nanoseconds. 0.2 s for 1000 calls
  // leaves a slow shared machine 1000 times the room it needs.
  const int n = 2147483647;
  const int64_t count = int64_t(1) << 62;
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < 1000; ++k) {
    int i = n - 1 - k * 1000;
    Range c = ch04::ring_chunk(count, n, i);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0.2)
      FAIL("ring_chunk took " << seconds << " s for " << k + 1 << " chunks of a vector of 2^62 floats in " << n
           << " chunks: compute chunk i from count, n and i alone, not by walking the chunks before it");
    // The chunks after i hold (n−1−i)·base elements plus one each for those
    // of them among the first count mod n: chunk i ends where they begin.
    const int64_t base = count / n, extra = count % n;
    const int64_t end = count - int64_t(n - 1 - i) * base - std::max<int64_t>(0, extra - (i + 1));
    if (c.end != end || c.size() < base || c.size() > base + 1)
      FAIL("chunk " << i << " of " << n << " over 2^62 elements is [" << c.begin << ", " << c.end << "); it must be "
           << "[" << end - base - (i < extra ? 1 : 0) << ", " << end << "), the chunks after it being laid up to the "
           "vector's end (does an intermediate product overflow, or a remainder go astray?)");
  }
}

TEST_CASE("ring_chunk: a chunk that does not exist is an error that says so", "[ch04]") {
  {
    INFO("a real chunk first: 10 elements in 4 chunks, chunk 3 has 2 (the other ring_chunk tests say what is off)");
    REQUIRE(ch04::ring_chunk(10, 4, 3).size() == 2);  // the untouched hole stops here, with NotImplemented
  }
  for (auto bad : {std::make_tuple(int64_t(10), 4, 4), std::make_tuple(int64_t(10), 4, -1),
                   std::make_tuple(int64_t(-1), 4, 0)}) {
    INFO("ring_chunk(" << std::get<0>(bad) << ", " << std::get<1>(bad) << ", " << std::get<2>(bad)
         << ") must throw dpt::Error: count >= 0, n >= 1 and 0 <= i < n are its preconditions");
    CHECK_THROWS_AS(ch04::ring_chunk(std::get<0>(bad), std::get<1>(bad), std::get<2>(bad)), Error);
  }
}
