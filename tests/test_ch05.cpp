// test_ch05.cpp — chapter 05's assign_buckets and the provided
// make_bucket_state: golden bucket layouts written out by hand, every
// layout's postconditions (ch05.h) checked by the test's own reading on
// random sizes and caps, a negative cap's error, and one state tensor per
// bucket on the given device.
//
// mark_ready and wait_and_unpack are in test_ch05_reducer.cpp,
// find_unused_parameters in test_ch05_unused.cpp, the chapter's program
// (training against one device, its trace and verdicts) in
// test_ch05_chapter.cpp.
#include "support/catch.h"
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ch05.h"
#include "support/ch05_words.h"

using namespace dpt;
using namespace dpt::ch05;
using dpt_test::Layout;
using dpt_test::listed;

namespace {
std::vector<std::vector<int>> params_of(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<int>> out;
  for (const Bucket& b : buckets) out.push_back(b.params);
  return out;
}

// The chapter's default model, 784-512-512-10: fc0.weight, fc0.bias, fc1.weight, … in bytes.
const std::vector<int64_t> kMlpBytes = {784 * 512 * 4, 512 * 4, 512 * 512 * 4, 512 * 4, 512 * 10 * 4, 10 * 4};
const int64_t kMiB = 1 << 20;

// What is wrong with `buckets` as a layout of `bytes` under caps (cap,
// first), in words, or "" when it meets every postcondition of ch05.h. The
// test's own reading of the spec: it shares no code with the hole.
std::string layout_problem(const std::vector<int64_t>& bytes, int64_t cap, int64_t first,
                           const std::vector<Bucket>& buckets) {
  const int n = int(bytes.size());
  std::vector<int> filled, forward, reverse, times(std::size_t(n), 0);
  for (const Bucket& b : buckets)
    for (int p : b.params) {
      if (p < 0 || p >= n) return "the layout holds parameter #" + std::to_string(p) + ", which does not exist";
      filled.push_back(p), ++times[std::size_t(p)];
    }
  for (int p = 0; p < n; ++p) forward.push_back(p), reverse.push_back(n - 1 - p);
  std::vector<int> none, twice;
  for (int p = 0; p < n; ++p) {
    if (times[std::size_t(p)] == 0) none.push_back(p);
    if (times[std::size_t(p)] > 1) twice.push_back(p);
  }
  if (!none.empty())
    return "parameter" + std::string(none.size() > 1 ? "s " : " ") + listed(none) + " in no bucket: every parameter "
           "must be in exactly one (the " + std::to_string(buckets.size()) + " buckets hold " + listed(filled) + ")";
  if (!twice.empty())
    return "parameter" + std::string(twice.size() > 1 ? "s " : " ") + listed(twice) + " in more than one bucket: "
           "every parameter must be in exactly one";
  if (n > 1 && filled == forward)
    return "the buckets list the parameters in forward order " + listed(filled) +
           ": backward makes the output layer's gradients final first and the input layer's last, so bucket 0 "
           "would wait for the whole backward and nothing would overlap";
  if (filled != reverse)
    return "the buckets list the parameters as " + listed(filled) + ", not in the order backward makes them final (" +
           listed(reverse) + ")";
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    const int64_t my_cap = b == 0 ? first : cap;
    const std::string which = b == 0 ? "the first-bucket cap" : "the cap of every bucket after bucket 0";
    int64_t sum = 0;
    for (int p : bucket.params) sum += bytes[std::size_t(p)];
    const std::string name = "bucket " + std::to_string(b) + " (parameters " + listed(bucket.params) + ")";
    if (bucket.params.empty()) return "bucket " + std::to_string(b) + " is empty: no bucket may be";
    if (sum != bucket.bytes)
      return name + " says it holds " + std::to_string(bucket.bytes) + " bytes, but its parameters add up to " +
             std::to_string(sum);
    if (bucket.params.size() > 1 && sum > my_cap)
      return name + " holds " + std::to_string(sum) + " bytes, over its cap of " + std::to_string(my_cap) +
             " bytes (" + which + "): only a bucket holding a single parameter may pass its cap" +
             (b == 0 && sum <= cap ? "; bucket 0's cap is first_cap_bytes, not cap_bytes" : "");
    if (b + 1 < buckets.size()) {
      int next = buckets[b + 1].params.front();
      if (sum + bytes[std::size_t(next)] <= my_cap)
        return name + " holds " + std::to_string(sum) + " bytes and was closed, but parameter " +
               std::to_string(next) + " (" + std::to_string(bytes[std::size_t(next)]) +
               " bytes), which opens the next bucket, would still have fit under its cap of " +
               std::to_string(my_cap) + " bytes (" + which + "): of the layouts within the caps, the contract's "
               "puts as many parameters as fit in bucket 0, then in bucket 1, and so on";
    }
  }
  return "";
}

// The layout must meet the spec (said in words when it does not), and equal
// the golden one worked out by hand in `why`.
void check_layout(const std::vector<int64_t>& bytes, int64_t cap, int64_t first, const Layout& golden,
                  const std::string& why) {
  INFO("parameter bytes " << listed(bytes) << ", cap " << cap << ", first-bucket cap " << first);
  std::vector<Bucket> got = assign_buckets(bytes, cap, first);
  std::string problem = layout_problem(bytes, cap, first, got);
  if (!problem.empty()) FAIL_CHECK(problem);
  INFO("by hand: " << why);
  CHECK(params_of(got) == golden);
}
}  // namespace

// ----------------------------------------------------------------------------
// assign_buckets

TEST_CASE("assign_buckets: golden layouts, reverse order, oversized parameter alone", "[ch05][needs:assign_buckets]") {
  check_layout(kMlpBytes, kMiB, kMiB, {{5, 4, 3}, {2}, {1}, {0}},
               "fc2.b, fc2.w, fc1.b = 22 KiB; fc1.w (1 MiB) would pass the cap: a bucket of its own, where fc1.b "
               "(2 KiB) no longer fits; fc0.w (1.5 MiB) alone, over the cap");
  check_layout(kMlpBytes, 0, 0, {{5}, {4}, {3}, {2}, {1}, {0}}, "cap 0: one bucket per parameter");
  check_layout(kMlpBytes, 25 * kMiB, 25 * kMiB, {{5, 4, 3, 2, 1, 0}}, "everything fits 25 MiB");
  check_layout(kMlpBytes, 25 * kMiB, 100, {{5}, {4, 3, 2, 1, 0}},
               "DDP's small first bucket: 100 bytes hold fc2.bias (40) only; the rest fit 25 MiB");
  check_layout({8, 8, 8, 8, 8}, 16, 16, {{4, 3}, {2, 1}, {0}}, "two 8-byte parameters fill a 16-byte bucket");
  check_layout({8, 8, 8, 8, 8}, 16, 8, {{4}, {3, 2}, {1, 0}}, "bucket 0 holds 8 bytes, the others 16");
  check_layout({8, 8, 8, 8, 8}, 8, 24, {{4, 3, 2}, {1}, {0}}, "bucket 0 holds 24 bytes, the others 8");
  check_layout({4, 40, 4, 4}, 12, 12, {{3, 2}, {1}, {0}}, "40 bytes pass the 12-byte cap: alone");
  INFO("no parameters: no buckets");
  CHECK(assign_buckets({}, kMiB, kMiB).empty());
}

TEST_CASE("assign_buckets: random sizes and caps meet every postcondition", "[ch05][needs:assign_buckets]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> bytes(std::size_t(1 + rng() % 12));
    for (auto& b : bytes) b = 4 * int64_t(1 + rng() % 300);
    int64_t cap = 4 * int64_t(rng() % 400), first = 4 * int64_t(rng() % 400);
    std::string problem = layout_problem(bytes, cap, first, assign_buckets(bytes, cap, first));
    if (!problem.empty())
      FAIL("parameter bytes " << listed(bytes) << ", cap " << cap << ", first-bucket cap " << first << ": " << problem);
  }
}

TEST_CASE("assign_buckets: a negative cap is a clear error", "[ch05][needs:assign_buckets]") {
  for (auto caps : {std::pair<int64_t, int64_t>{-1, 8}, {8, -1}}) {
    INFO("cap " << caps.first << ", first-bucket cap " << caps.second << ": must be a dpt::Error that says 'cap'");
    CHECK_THROWS_WITH(assign_buckets({8}, caps.first, caps.second), contains_text("cap"));
  }
}

// ----------------------------------------------------------------------------
// make_bucket_state (provided): the buckets live on the rank's device

TEST_CASE("make_bucket_state: one zeroed tensor per bucket on the given device, counted as comm buffers", "[ch05]") {
  Device& device = Device::cpu(9);  // no other test in this process uses it
  std::size_t before = device.ledger().current(MemoryCategory::Comm);
  BucketState state = make_bucket_state({{{2, 1}, 12}, {{0}, 8}}, device, [](int) {});
  REQUIRE(state.flat.size() == 2);
  for (std::size_t b = 0; b < 2; ++b) {
    INFO("bucket " << b);
    CHECK(&state.flat[b].device() == &device);  // on the host, a GPU's ring would read host memory
    CHECK(state.flat[b].to_vector() == std::vector<float>(b == 0 ? 3 : 2, 0.0f));
    CHECK_FALSE(state.launched[b]);
    CHECK_THROWS_WITH(state.work[b]->wait(), contains_text("never launched"));  // a placeholder, never a hang
  }
  CHECK(device.ledger().current(MemoryCategory::Comm) - before == 20);  // 12 + 8 bytes
}
