// test_ch14.cpp — chapter 14's attention hole against its contract's laws,
// each on inputs built to expose it: no position reads a later one, each
// row is a convex combination of values, a position's weights come from its
// own query against the keys it reads, scores of unit variance; and against
// an oracle written as loops in double (read it after your hole passes: it
// is an answer).
//
// Here: causal_attention. LayerNorm's backward in test_ch14_layer_norm.cpp,
// generate in test_ch14_sample.cpp, the program in test_ch14_chapter.cpp.
#include "support/catch.h"
#include "support/relative_gap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ch14.h"
#include "dpt/autograd.h"

using namespace dpt;

using dpt_test::relative_gap;

namespace {
std::vector<float> normals(int64_t n, uint64_t seed, float std = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = std * rng.normal();
  return v;
}
Tensor host(const Shape& shape, const std::vector<float>& values) {
  return Tensor::from_vector(shape, values, Device::host());
}

// The definition, in double: y[g, i] = Σ_{j ≤ i} softmax_j(q_i·k_j / √D) v_j.
std::vector<double> attention_by_loops(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, int64_t G, int64_t T, int64_t D) {
  std::vector<double> y(q.size(), 0.0);
  auto at = [&](int64_t g, int64_t t, int64_t d) { return std::size_t((g * T + t) * D + d); };
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> w(std::size_t(i + 1));
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(q[at(g, i, d)]) * double(k[at(g, j, d)]);
        w[std::size_t(j)] = dot / std::sqrt(double(D));
      }
      const double top = *std::max_element(w.begin(), w.end());
      double total = 0;
      for (double& x : w) total += x = std::exp(x - top);
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t d = 0; d < D; ++d) y[at(g, i, d)] += w[std::size_t(j)] / total * double(v[at(g, j, d)]);
    }
  return y;
}

}  // namespace

TEST_CASE("causal_attention: equals an independent oracle (loops in double) on random q, k, v", "[ch14]") {
  struct Case { int64_t G, T, D; float std; };
  // T ≠ D (a transpose cannot pass by shape), T = 1, and scores large enough that the scale matters.
  for (Case c : {Case{3, 7, 4, 1.0f}, Case{2, 1, 5, 1.0f}, Case{1, 9, 16, 1.0f}, Case{2, 6, 3, 3.0f}}) {
    const int64_t n = c.G * c.T * c.D;
    const std::vector<float> q = normals(n, 1, c.std), k = normals(n, 2, c.std), v = normals(n, 3);
    Tensor y = ch14::causal_attention(host({c.G, c.T, c.D}, q), host({c.G, c.T, c.D}, k), host({c.G, c.T, c.D}, v));
    INFO("G = " << c.G << ", T = " << c.T << ", D = " << c.D << ", entries of q and k with std " << c.std);
    REQUIRE(y.shape() == Shape({c.G, c.T, c.D}));
    // float against double: a few roundings of O(1) values, ~1e-7 relative.
    CHECK(relative_gap(y.to_vector(), attention_by_loops(q, k, v, c.G, c.T, c.D)) <= 1e-5);
  }
}

TEST_CASE("causal_attention: no position reads a later one (changing q, k, v after position i leaves rows <= i unchanged)",
          "[ch14]") {
  const int64_t G = 2, T = 6, D = 4, n = G * T * D;
  std::vector<float> q = normals(n, 4), k = normals(n, 5), v = normals(n, 6);
  const std::vector<float> before = ch14::causal_attention(host({G, T, D}, q), host({G, T, D}, k), host({G, T, D}, v)).to_vector();
  for (int64_t i = 0; i + 1 < T; ++i) {
    std::vector<float> q2 = q, k2 = k, v2 = v;  // every entry after position i, changed
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = i + 1; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          const std::size_t e = std::size_t((g * T + t) * D + d);
          q2[e] += 1.5f, k2[e] -= 2.0f, v2[e] *= -3.0f;
        }
    const std::vector<float> after =
        ch14::causal_attention(host({G, T, D}, q2), host({G, T, D}, k2), host({G, T, D}, v2)).to_vector();
    REQUIRE(after.size() == before.size());
    double moved = 0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = 0; t <= i; ++t)
        for (int64_t d = 0; d < D; ++d) {
          const std::size_t e = std::size_t((g * T + t) * D + d);
          moved = std::max(moved, double(std::fabs(after[e] - before[e])));
        }
    INFO("positions after " << i << " changed; the largest change of a row at or before " << i << ": " << moved);
    CHECK(moved <= 1e-6);  // the future's weights are 0: nothing to round
  }
}

TEST_CASE("causal_attention: each row's weights are >= 0, sum to 1 and vanish beyond the row (values = one-hot positions)",
          "[ch14]") {
  // v[j] = e_j (D = T): then y[i] is row i's weights themselves.
  const int64_t T = 5, D = T;
  const std::vector<float> q = normals(T * D, 7), k = normals(T * D, 8);
  std::vector<float> v(std::size_t(T * D), 0.0f);
  for (int64_t j = 0; j < T; ++j) v[std::size_t(j * D + j)] = 1.0f;
  const std::vector<float> w = ch14::causal_attention(host({1, T, D}, q), host({1, T, D}, k), host({1, T, D}, v)).to_vector();
  REQUIRE(w.size() == std::size_t(T * D));
  for (int64_t i = 0; i < T; ++i) {
    double total = 0, negative = 0, beyond = 0;
    for (int64_t j = 0; j < T; ++j) {
      const double x = w[std::size_t(i * D + j)];
      total += x, negative = std::min(negative, x);
      if (j > i) beyond = std::max(beyond, std::fabs(x));
    }
    INFO("row " << i << ": weights sum to " << total << ", most negative " << negative << ", largest beyond the row " << beyond);
    CHECK(std::fabs(total - 1.0) <= 1e-6);
    CHECK(negative == 0.0);
    CHECK(beyond == 0.0);
    CHECK(w[std::size_t(i * D + i)] > 0.0f);  // a position reads itself
  }
}

TEST_CASE("causal_attention: a query at position i is scored against the keys of positions j <= i (other queries do "
          "not move row i)",
          "[ch14]") {
  // Row i's weights are position i's query matched against keys: changing
  // every other position's query leaves row i where it was. Scoring the
  // other way round (each key against the queries) moves it.
  const int64_t G = 2, T = 5, D = 3, n = G * T * D;
  const std::vector<float> q = normals(n, 15), k = normals(n, 16), v = normals(n, 17);
  const std::vector<float> before = ch14::causal_attention(host({G, T, D}, q), host({G, T, D}, k), host({G, T, D}, v)).to_vector();
  REQUIRE(before.size() == std::size_t(n));
  for (int64_t i = 0; i < T; ++i) {
    std::vector<float> q2 = q;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          if (t != i) q2[std::size_t((g * T + t) * D + d)] = -2.0f * q2[std::size_t((g * T + t) * D + d)] + 1.0f;
    const std::vector<float> after =
        ch14::causal_attention(host({G, T, D}, q2), host({G, T, D}, k), host({G, T, D}, v)).to_vector();
    REQUIRE(after.size() == before.size());
    double moved = 0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t d = 0; d < D; ++d) {
        const std::size_t e = std::size_t((g * T + i) * D + d);
        moved = std::max(moved, double(std::fabs(after[e] - before[e])));
      }
    INFO("the queries of every position but " << i << " changed; row " << i << " moved by " << moved
                                              << " (a query at position i must be scored against the keys of positions "
                                                 "j <= i, not a key against the queries)");
    CHECK(moved <= 1e-6);  // row i never reads another query: the same sums, bit for bit
  }
}

TEST_CASE("causal_attention: for unit-variance q and k the scores have variance 1, whatever D", "[ch14]") {
  // Position 1 reads positions 0 and 1; with values one-hot in their first
  // two entries, y[g, 1] holds the two weights, and their log-odds is the
  // difference of two scores. The keys are independent, so over many heads
  // its variance is twice the scores' variance.
  for (int64_t D : {4, 16, 64}) {
    const int64_t G = 4000, T = 2, n = G * T * D;
    const std::vector<float> q = normals(n, 9), k = normals(n, 10);
    std::vector<float> v(std::size_t(n), 0.0f);
    for (int64_t g = 0; g < G; ++g) v[std::size_t(g * T * D)] = 1.0f, v[std::size_t((g * T + 1) * D + 1)] = 1.0f;
    const std::vector<float> y = ch14::causal_attention(host({G, T, D}, q), host({G, T, D}, k), host({G, T, D}, v)).to_vector();
    REQUIRE(y.size() == std::size_t(n));
    double sum = 0, squares = 0;
    for (int64_t g = 0; g < G; ++g) {
      const double odds = std::log(double(y[std::size_t((g * T + 1) * D)]) / double(y[std::size_t((g * T + 1) * D + 1)]));
      sum += odds, squares += odds * odds;
    }
    const double variance = (squares / double(G) - (sum / double(G)) * (sum / double(G))) / 2;
    // 4000 heads: the estimate's relative spread is ~3 %; a scale off by √2
    // doubles or halves it.
    INFO("D = " << D << ": over " << G << " heads of unit-variance q and k, the scores have variance " << variance
                << ", not 1");
    CHECK(std::fabs(variance - 1.0) <= 0.15);
  }
}

TEST_CASE("causal_attention: d loss / d q, k, v equal central differences of the definition", "[ch14]") {
  const int64_t G = 2, T = 4, D = 3, n = G * T * D;
  const std::vector<float> q = normals(n, 11), k = normals(n, 12), v = normals(n, 13), r = normals(n, 14);
  Tensor qt = host({G, T, D}, q).set_requires_grad(true), kt = host({G, T, D}, k).set_requires_grad(true),
         vt = host({G, T, D}, v).set_requires_grad(true);
  backward(ch14::causal_attention(qt, kt, vt), host({G, T, D}, r));  // L = Σ r ⊙ y
  const std::vector<float>* inputs[3] = {&q, &k, &v};
  const Tensor* tensors[3] = {&qt, &kt, &vt};
  const char* names[3] = {"q", "k", "v"};
  for (int which = 0; which < 3; ++which) {
    REQUIRE(tensors[which]->grad().defined());
    std::vector<double> numeric(static_cast<std::size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      std::vector<float> in[3] = {q, k, v};
      auto loss = [&](float value) {
        in[which][std::size_t(e)] = value;
        const std::vector<double> y = attention_by_loops(in[0], in[1], in[2], G, T, D);
        double sum = 0;
        for (std::size_t i = 0; i < y.size(); ++i) sum += double(r[i]) * y[i];
        return sum;
      };
      const float up = (*inputs[which])[std::size_t(e)] + 1e-3f, down = (*inputs[which])[std::size_t(e)] - 1e-3f;
      numeric[std::size_t(e)] = (loss(up) - loss(down)) / (double(up) - double(down));  // the step float could take
    }
    INFO("d loss / d " << names[which]);
    CHECK(relative_gap(tensors[which]->grad().to_vector(), numeric) <= 1e-3);  // truncation ~1e-6, float ~1e-6
  }
}
