// test_ch10_fast.cpp — the fast paths of chapter 10's compressors against
// the lesson's code: the array casts (fast_casts.h) against dpt/half.h's
// hand-rounded conversions, bit for bit, on every 16-bit pattern and on
// floats chosen where rounding is delicate (every tie, its neighbours,
// subnormals, the overflow edge, inf, NaN with any payload) plus random bits.
// The oracle is the per-element lesson code; the fast code shares none of it.
// Then the compressors that run them, against serial oracles written here:
// the 16-bit ring sum hop by hop, top-k's selection by a full sort, sign's
// bits and scale.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <algorithm>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "compressor.h"
#include "dpt/check.h"
#include "fast_casts.h"
#include "formats.h"
#include "support/ranks.h"
#include "topk_select.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Floats where a 16-bit rounding can go wrong: for each 16-bit pattern h of
// a format, the tie half-way to the next pattern and the floats either side
// of it, the pattern itself, and float32's specials; then random bit patterns.
std::vector<float> delicate_floats(bool fp16) {
  std::vector<uint32_t> b;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if (fp16) {
      const float lo = from_fp16(uint16_t(h)), hi = from_fp16(uint16_t(h + 1));
      if (!std::isfinite(lo) || !std::isfinite(hi) || (h & 0x7fffu) == 0x7fffu) continue;
      const uint32_t tie = to_bits(0.5f * (lo + hi));  // exact: 11 significant bits in float's 24
      for (uint32_t d : {0u, 1u, 2u}) b.push_back(tie - d), b.push_back(tie + d);
      b.push_back(to_bits(lo));
    } else {
      for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) b.push_back((h << 16) | low);
    }
  }
  for (uint32_t edge : {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u, 0x7f7fffffu, 0x7f800000u,
                        0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0x00000001u, 0x007fffffu, 0x00800000u,
                        0x33000000u, 0x33000001u, 0x32ffffffu, 0x387fffffu, 0x38800000u})
    b.push_back(edge), b.push_back(edge | 0x80000000u);
  std::mt19937 generator(10);
  for (int i = 0; i < 1 << 20; ++i) b.push_back(generator());
  std::vector<float> x(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) x[i] = from_bits(b[i]);
  return x;
}

// The first index where the fast halves differ from the lesson's, or -1.
template <class Lesson>
int64_t first_difference(const std::vector<float>& x, const std::vector<uint16_t>& fast, Lesson lesson) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (fast[i] != lesson(x[i])) return int64_t(i);
  return -1;
}

std::string describe(float x, uint16_t fast, uint16_t lesson) {
  std::ostringstream s;
  s << "input bits 0x" << std::hex << to_bits(x) << " (" << x << "): fast 0x" << fast << ", lesson 0x" << lesson;
  return s.str();
}
}  // namespace

TEST_CASE("fast fp16 encode = the lesson's to_fp16, bit for bit, on every tie, subnormal, edge and NaN", "[ch10]") {
  const std::vector<float> x = delicate_floats(true);
  std::vector<Fp16Path> paths = {Fp16Path::Portable};
  if (best_fp16_path() == Fp16Path::F16C) {
    paths.push_back(Fp16Path::F16C);
  } else {
    CHECK_THROWS_AS(to_fp16_many(x.data(), nullptr, 0, Fp16Path::F16C), dpt::Error);  // no F16C: asking for it is an error
  }
  for (Fp16Path path : paths)
    for (int64_t tail : {0, 1, 7}) {  // lengths that are and are not whole vectors
      const int64_t n = int64_t(x.size()) - tail;
      std::vector<uint16_t> fast(std::size_t(n) + tail, 0xabcd);
      to_fp16_many(x.data(), fast.data(), n, path);
      const std::vector<float> used(x.begin(), x.begin() + n);
      fast.resize(std::size_t(n));
      const int64_t at = first_difference(used, fast, [](float v) { return to_fp16(v); });
      INFO(fp16_path_name(path) << ", n = " << n << ": "
                                << (at < 0 ? "all equal" : describe(x[std::size_t(at)], fast[std::size_t(at)], to_fp16(x[std::size_t(at)]))));
      CHECK(at == -1);
    }
}

TEST_CASE("fast bf16 encode = the lesson's to_bf16, bit for bit, on every tie, subnormal, edge and NaN", "[ch10]") {
  const std::vector<float> x = delicate_floats(false);
  for (int64_t tail : {0, 3}) {
    const int64_t n = int64_t(x.size()) - tail;
    std::vector<uint16_t> fast(static_cast<std::size_t>(n));
    to_bf16_many(x.data(), fast.data(), n);
    const std::vector<float> used(x.begin(), x.begin() + n);
    const int64_t at = first_difference(used, fast, [](float v) { return to_bf16(v); });
    INFO("n = " << n << ": " << (at < 0 ? "all equal" : describe(x[std::size_t(at)], fast[std::size_t(at)], to_bf16(x[std::size_t(at)]))));
    CHECK(at == -1);
  }
}

TEST_CASE("fast fp16 and bf16 decodes = the lesson's, bit for bit, on all 65536 patterns", "[ch10]") {
  std::vector<uint16_t> h(0x10000);
  for (uint32_t i = 0; i < 0x10000u; ++i) h[i] = uint16_t(i);
  std::vector<float> fp16(h.size()), bf16(h.size());
  from_fp16_many(h.data(), fp16.data(), int64_t(h.size()));
  from_bf16_many(h.data(), bf16.data(), int64_t(h.size()));
  int64_t fp16_wrong = 0, bf16_wrong = 0, first = -1;
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const bool f = to_bits(fp16[i]) != to_bits(from_fp16(uint16_t(i))), b = to_bits(bf16[i]) != to_bits(from_bf16(uint16_t(i)));
    fp16_wrong += f, bf16_wrong += b;
    if ((f || b) && first < 0) first = i;
  }
  INFO("patterns decoded differently: fp16 " << fp16_wrong << ", bf16 " << bf16_wrong << "; first 0x" << std::hex << first);
  CHECK(fp16_wrong == 0);
  CHECK(bf16_wrong == 0);
}

// ----------------------------------------------------------------------------
// the compressors on the fast paths, against serial oracles

namespace {
// Rank r's gradient: random normals, some huge (fp16 overflows), some tiny
// (subnormal), repeated magnitudes (top-k ties), zeros of both signs.
std::vector<float> gradient_of(int r, int64_t psi) {
  std::vector<float> x(static_cast<std::size_t>(psi));
  std::mt19937 generator(uint32_t(500 + r));
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(generator);
  for (int64_t i = 0; i < psi; i += 37) x[std::size_t(i)] = 3.0f * (i % 2 ? 1 : -1);  // ties at |x| = 3
  for (int64_t i = 5; i < psi; i += 101) x[std::size_t(i)] = 1e5f;                    // past fp16's largest
  for (int64_t i = 7; i < psi; i += 53) x[std::size_t(i)] = 3e-7f * normal(generator);  // fp16 subnormals
  for (int64_t i = 11; i < psi; i += 97) x[std::size_t(i)] = i % 2 ? 0.0f : -0.0f;
  return x;
}

// Every rank's x and delivered after one reduce of gradient_of(rank) under `spec`.
struct Reduced {
  std::vector<std::vector<float>> x, delivered;
};
Reduced reduce_all(const std::string& spec, const std::vector<Shape>& shapes, int world, int64_t psi) {
  Reduced out{std::vector<std::vector<float>>(std::size_t(world)), std::vector<std::vector<float>>(std::size_t(world))};
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    auto compressor = make_compressor(spec, shapes, 1);
    std::vector<float> x = gradient_of(ctx.rank, psi), delivered;
    compressor->reduce(ctx.comm, x, delivered);
    std::lock_guard<std::mutex> lock(mutex);
    out.x[std::size_t(ctx.rank)] = x, out.delivered[std::size_t(ctx.rank)] = delivered;
  });
  return out;
}

bool same_bits(float a, float b) { return to_bits(a) == to_bits(b); }
}  // namespace

TEST_CASE("fp16/bf16 ring on 1-4 ranks = the lesson's hop-by-hop 16-bit sum, bit for bit", "[ch10]") {
  const int64_t psi = 1001;  // odd: the last word's high half is padding
  for (Half format : {Half::FP16, Half::BF16})
    for (int world : {1, 2, 3, 4}) {
      const std::string spec = format == Half::FP16 ? "fp16" : "bf16";
      const Reduced got = reduce_all(spec, {{psi}}, world, psi);
      const int64_t c = ((psi + 1) / 2 + world - 1) / world;  // words per chunk
      int64_t wrong = 0, first = -1;
      for (int64_t i = 0; i < psi; ++i) {
        // Chunk j starts on rank j and travels right: each rank adds its own
        // 16-bit value to the partial sum in float32 and rounds it back.
        const int j = int((i / 2) / c);
        float sum = round_to(format, gradient_of(j, psi)[std::size_t(i)] / float(world));
        for (int t = 1; t < world; ++t)
          sum = round_to(format, round_to(format, gradient_of((j + t) % world, psi)[std::size_t(i)] / float(world)) + sum);
        for (int r = 0; r < world; ++r) {
          const float own = round_to(format, gradient_of(r, psi)[std::size_t(i)] / float(world)) * float(world);
          const bool bad = !same_bits(got.x[std::size_t(r)][std::size_t(i)], sum) || !same_bits(got.delivered[std::size_t(r)][std::size_t(i)], own);
          wrong += bad;
          if (bad && first < 0) first = i;
        }
      }
      INFO(spec << " on " << world << " ranks: " << wrong << " entries differ from the lesson's ring sum (or this rank's own rounded value); first at " << first);
      CHECK(wrong == 0);
    }
}

TEST_CASE("top-k's selection = a full sort's first K (ties to the lower index), on skewed, tied and sorted vectors", "[ch10]") {
  std::vector<std::vector<float>> cases = {gradient_of(0, 5000), gradient_of(1, 777)};
  // Large only where a strided sample looks (every 10th of 40960): the first
  // bound passes too few, and the selection must lower it, down to 0 for k = n.
  std::vector<float> sampled_large(40960), equal(1000, -2.5f), spiky(4096, 0.0f);
  for (std::size_t i = 0; i < sampled_large.size(); ++i) sampled_large[i] = i % 10 == 0 ? 1000.0f + float(i) : 1e-3f * float(i);
  for (std::size_t i = 0; i < spiky.size(); i += 997) spiky[i] = 1.0f;
  cases.push_back(sampled_large), cases.push_back(equal), cases.push_back(spiky);
  for (const std::vector<float>& x : cases) {
    std::vector<int64_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return std::fabs(x[std::size_t(a)]) > std::fabs(x[std::size_t(b)]); });
    for (int64_t k : {int64_t(1), int64_t(7), int64_t(x.size() / 100 + 1), int64_t(x.size() / 3), int64_t(x.size())}) {
      std::vector<int64_t> want(order.begin(), order.begin() + k);
      std::sort(want.begin(), want.end());
      INFO("n = " << x.size() << ", k = " << k << ": the K largest |x|, a tie to the lower index, in index order");
      CHECK(top_k_indices(x, k) == want);
    }
  }
}

TEST_CASE("sign on 1-4 ranks = the serial sum of every rank's ±scale, scale = mean |x| to one float rounding", "[ch10]") {
  const std::vector<Shape> shapes = {{30, 33}, {30}, {1}};
  const int64_t psi = 30 * 33 + 30 + 1;
  for (int world : {1, 2, 3, 4}) {
    const Reduced got = reduce_all("sign", shapes, world, psi);
    std::vector<float> sum(static_cast<std::size_t>(psi), 0.0f), own0(static_cast<std::size_t>(psi));
    for (int r = 0; r < world; ++r) {
      const std::vector<float> g = gradient_of(r, psi);
      for (int64_t at = 0, t = 0; t < 3; at += shape_numel(shapes[std::size_t(t)]), ++t) {
        const int64_t size = shape_numel(shapes[std::size_t(t)]);
        double magnitude = 0;
        for (int64_t i = 0; i < size; ++i) magnitude += std::fabs(double(g[std::size_t(at + i)]));
        // The scale travels as a float: the mean rounded once (an order of
        // the double sum may move it by one float ulp, no more).
        const float scale = float(magnitude / double(size)),
                    sent = got.delivered[std::size_t(r)][std::size_t(at)] < 0 ? -got.delivered[std::size_t(r)][std::size_t(at)]
                                                                                : got.delivered[std::size_t(r)][std::size_t(at)];
        INFO(world << " ranks, rank " << r << ", tensor " << t << ": scale " << sent << ", mean |x| " << scale);
        CHECK(std::fabs(sent - scale) <= std::nextafter(scale, 1e30f) - scale);
        for (int64_t i = 0; i < size; ++i) {
          const float value = g[std::size_t(at + i)] >= 0 ? sent : -sent;
          sum[std::size_t(at + i)] += value;
          if (r == 0) own0[std::size_t(at + i)] = value;
        }
      }
    }
    int64_t wrong = 0;
    for (int64_t i = 0; i < psi; ++i) wrong += !same_bits(got.x[0][std::size_t(i)], sum[std::size_t(i)] / float(world)) ||
                                               !same_bits(got.delivered[0][std::size_t(i)], own0[std::size_t(i)]);
    for (int r = 1; r < world; ++r) wrong += std::memcmp(got.x[std::size_t(r)].data(), got.x[0].data(), std::size_t(4 * psi)) != 0;
    INFO(world << " ranks: entries that are not the rank-order sum of every rank's ±scale / n (or ranks that disagree): " << wrong);
    CHECK(wrong == 0);
  }
}
