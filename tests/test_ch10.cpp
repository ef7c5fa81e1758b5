// test_ch10.cpp — chapter 10's 16-bit formats against known bit patterns
// (ties to even, subnormals, overflow to inf), and the top-k hole against a
// serial dense sum of each rank's top-k written out here.
//
// Here: formats and topk_reconstruct. Error feedback in test_ch10_feedback.cpp,
// PowerSGD in test_ch10_powersgd.cpp, training (bytes against the traffic
// log) in test_ch10_training.cpp, the program in test_ch10_chapter.cpp.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>

#include "ch10.h"
#include "formats.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace

// ----------------------------------------------------------------------------
// fp16 and bf16 by hand

TEST_CASE("fp16: round to nearest even, subnormals, overflow to inf, at known bit patterns", "[ch10]") {
  struct Case { float x; uint16_t want; const char* why; };
  const Case cases[] = {
      {1.0f, 0x3c00, "1"}, {-2.0f, 0xc000, "-2"}, {0.1f, 0x2e66, "0.1 (rounded down)"},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00, "1 + 2^-11: a tie between 1 and 1 + 2^-10 goes to the even 1"},
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02, "1 + 3*2^-11: a tie goes up to the even mantissa 2"},
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01, "just above a tie rounds up"},
      {65504.0f, 0x7bff, "the largest finite fp16"}, {65519.0f, 0x7bff, "below 65520 rounds to 65504"},
      {65520.0f, 0x7c00, "65520 ties between 65504 (odd) and 65536: to inf"}, {1e6f, 0x7c00, "overflow: inf"},
      {-1e6f, 0xfc00, "overflow: -inf"}, {std::ldexp(1.0f, -14), 0x0400, "2^-14: the smallest normal"},
      {std::ldexp(1.0f, -24), 0x0001, "2^-24: the smallest subnormal"},
      {1023 * std::ldexp(1.0f, -24), 0x03ff, "the largest subnormal"},
      {std::ldexp(1.0f, -25), 0x0000, "2^-25 ties between 0 and 2^-24: to the even 0"},
      {1.5f * std::ldexp(1.0f, -25), 0x0001, "above half of 2^-24 rounds up to it"},
      {3 * std::ldexp(1.0f, -25), 0x0002, "1.5 * 2^-24 ties between 1 and 2 units: to 2"},
      {-std::ldexp(1.0f, -30), 0x8000, "far below the subnormals: -0"},
      {std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26), 0x0400, "just under 2^-14 rounds up into the normals"},
  };
  for (const Case& c : cases) {
    INFO("to_fp16(" << c.x << ") should be 0x" << std::hex << c.want << " (" << c.why << "), got 0x" << to_fp16(c.x));
    CHECK(to_fp16(c.x) == c.want);
  }
  CHECK(std::isnan(from_fp16(to_fp16(std::nanf("")))));
  CHECK(from_fp16(0x0001) == std::ldexp(1.0f, -24));
  CHECK(from_fp16(0x7bff) == 65504.0f);
  CHECK(std::isinf(from_fp16(0x7c00)));
  // Every finite pattern decodes to a value that encodes back to itself.
  int64_t wrong = 0;
  for (uint32_t h = 0; h < 0x10000; ++h)
    if ((h & 0x7c00) != 0x7c00 && to_fp16(from_fp16(uint16_t(h))) != h) ++wrong;
  INFO(wrong << " fp16 patterns do not survive decode then encode");
  CHECK(wrong == 0);
}

TEST_CASE("bf16: float32's top half, rounded to nearest even", "[ch10]") {
  struct Case { float x; uint16_t want; const char* why; };
  const Case cases[] = {
      {1.0f, 0x3f80, "1"}, {3.0f, 0x4040, "3"},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80, "1 + 2^-8 ties: to the even 1"},
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3f82, "1 + 3*2^-8 ties: up to the even mantissa 2"},
      {bits_float(0x7f7fffffu), 0x7f80, "the largest float rounds past bf16's largest: inf"},
      {bits_float(0x00010000u), 0x0001, "a subnormal keeps its top bits"},
      {bits_float(0x00008000u), 0x0000, "half of the smallest bf16 subnormal ties to 0"},
  };
  for (const Case& c : cases) {
    INFO("to_bf16(bits 0x" << std::hex << [&] { uint32_t b; std::memcpy(&b, &c.x, 4); return b; }() << ") should be 0x"
                           << c.want << " (" << c.why << "), got 0x" << to_bf16(c.x));
    CHECK(to_bf16(c.x) == c.want);
  }
  CHECK(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  CHECK(from_bf16(0x3f80) == 1.0f);
}

TEST_CASE("pack and unpack carry two 16-bit values per 32-bit word", "[ch10]") {
  const std::vector<uint16_t> halves = {0x0001, 0xffff, 0x7c00, 0x1234, 0xabcd};
  const std::vector<float> words = pack(halves);
  CHECK(words.size() == 3);
  CHECK(unpack(words, 5) == halves);
}

// ----------------------------------------------------------------------------
// top-k: the reconstruction against a serial dense sum

namespace {
// A gathered array: rank r's pairs (index, value) in row r, as the contract lays them out.
std::vector<float> gathered_of(const std::vector<std::vector<std::pair<int64_t, float>>>& rows) {
  std::vector<float> out;
  for (const auto& row : rows) {
    for (const auto& pair : row) out.push_back(index_word(pair.first));
    for (const auto& pair : row) out.push_back(pair.second);
  }
  return out;
}
}  // namespace

TEST_CASE("topk_reconstruct: the mean of every rank's dense top-k, pairs that share an index added", "[ch10]") {
  // Three ranks, k = 3, Ψ = 8; index 2 comes from all three, index 5 from two.
  // Values are small multiples of 1/4: every sum is exact.
  const std::vector<std::vector<std::pair<int64_t, float>>> rows = {
      {{2, 1.0f}, {5, -2.0f}, {7, 0.5f}}, {{5, 4.0f}, {2, 0.25f}, {0, -1.0f}}, {{2, 2.0f}, {3, 8.0f}, {6, -0.75f}}};
  std::vector<double> dense(8, 0);  // the oracle: each rank's dense vector, summed, divided
  for (const auto& row : rows)
    for (const auto& pair : row) dense[std::size_t(pair.first)] += pair.second;
  std::vector<float> mean(8, 123.0f);  // garbage: the hole must write every entry
  topk_reconstruct(gathered_of(rows), 3, 3, mean);
  for (int64_t i = 0; i < 8; ++i) {
    INFO("entry " << i << ": expected " << dense[std::size_t(i)] / 3 << ", got " << mean[std::size_t(i)]
                  << " — the mean over ranks of the dense vectors the pairs stand for (a pair's value belongs at its "
                     "index; pairs of different ranks at the same index add up; zero where no rank sent; divided by "
                     "the number of ranks)");
    CHECK(mean[std::size_t(i)] == Approx(dense[std::size_t(i)] / 3).epsilon(1e-7).margin(0));
  }
}

TEST_CASE("topk_reconstruct: refuses an index outside the vector", "[ch10]") {
  std::vector<float> mean(4);
  bool refused = false;
  try {
    topk_reconstruct(gathered_of({{{4, 1.0f}}}), 1, 1, mean);
  } catch (const NotImplemented&) {
    throw;  // the hole, not a refusal
  } catch (const Error&) {
    refused = true;
  }
  INFO("an index past the vector's end must throw dpt::Error, not write past it");
  CHECK(refused);
}

TEST_CASE("topk:K on 1-4 ranks: the serial mean of each rank's own top-k, the same bits on every rank", "[ch10]") {
  for (int world : {1, 2, 3, 4}) {
    const int64_t psi = 40, k = 6;
    // Rank r's vector: distinct magnitudes, and ranks that overlap in their largest entries.
    auto vector_of = [&](int r) {
      std::vector<float> x(static_cast<std::size_t>(psi));
      std::mt19937 generator(uint32_t(100 + r));
      std::uniform_real_distribution<float> u(-1, 1);
      for (float& v : x) v = u(generator);
      for (int64_t i = 0; i < 4; ++i) x[std::size_t(i * 7)] = float(10 + r + i);  // shared large entries
      return x;
    };
    std::vector<double> oracle(std::size_t(psi), 0);
    for (int r = 0; r < world; ++r) {  // each rank's top-k by a full sort, written here
      std::vector<float> x = vector_of(r);
      std::vector<int64_t> order(static_cast<std::size_t>(psi));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return std::fabs(x[std::size_t(a)]) > std::fabs(x[std::size_t(b)]); });
      for (int64_t j = 0; j < k; ++j) oracle[std::size_t(order[std::size_t(j)])] += x[std::size_t(order[std::size_t(j)])];
    }
    std::vector<std::vector<float>> got(static_cast<std::size_t>(world));
    std::mutex mutex;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      auto compressor = make_compressor("topk:" + std::to_string(k), {{psi}}, 1);
      std::vector<float> x = vector_of(ctx.rank), delivered;
      compressor->reduce(ctx.comm, x, delivered);
      std::lock_guard<std::mutex> lock(mutex);
      got[std::size_t(ctx.rank)] = x;
    });
    for (int r = 0; r < world; ++r) {
      INFO(world << " ranks: rank " << r << " decoded other bits than rank 0: every rank decodes the same pairs");
      CHECK(std::memcmp(got[std::size_t(r)].data(), got[0].data(), std::size_t(psi) * 4) == 0);
    }
    for (int64_t i = 0; i < psi; ++i) {
      INFO(world << " ranks, entry " << i << ": the serial mean of each rank's dense top-" << k << " is "
                 << oracle[std::size_t(i)] / world << ", got " << got[0][std::size_t(i)]);
      CHECK(got[0][std::size_t(i)] == Approx(oracle[std::size_t(i)] / world).epsilon(1e-6).margin(1e-7));
    }
  }
}
