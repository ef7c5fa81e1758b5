// test_ch14_sample.cpp — chapter 14's generate on models whose answers are
// known: scorers written here whose logits per position are chosen, so the
// distribution of the next token is exact. Laws: the prompt is kept and
// count tokens follow, the model is never asked for more than its context,
// each new token follows the model's prediction for that token (not for
// another), frequencies of seeded draws match the tempered distribution
// P ∝ p^(1/τ) within a binomial bound, a temperature near 0 takes the most
// likely token.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "ch14.h"
#include "dpt/check.h"

using namespace dpt;

namespace {
// Row i's scores are `base` rotated to start at tokens[i]: the token after t
// is t + d (mod V) with probability softmax(base / temperature)[d]. It
// answers any length (a GPT refuses more than its context) and remembers the
// longest request, so only the test about the context fails when a window is
// not cropped.
struct RotatingScorer {
  std::vector<float> base;
  int64_t longest = 0;
  Tensor operator()(const std::vector<int64_t>& tokens) {
    longest = std::max(longest, int64_t(tokens.size()));
    DPT_CHECK(!tokens.empty(), "the model was asked for no tokens");
    const int64_t V = int64_t(base.size());
    std::vector<float> logits(tokens.size() * base.size());
    for (std::size_t i = 0; i < tokens.size(); ++i)
      for (int64_t d = 0; d < V; ++d) logits[i * base.size() + std::size_t((tokens[i] + d) % V)] = base[std::size_t(d)];
    return Tensor::from_vector({int64_t(tokens.size()), V}, logits, Device::host());
  }
};

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp(double(logits[i]) / temperature);
  for (double& x : p) x /= total;
  return p;
}
}  // namespace

TEST_CASE("generate: returns the prompt unchanged, then count new tokens, each a token of the vocabulary", "[ch14]") {
  RotatingScorer model{{0.0f, 1.0f, 0.5f}};
  const std::vector<int64_t> prompt = {2, 0, 1};
  for (int64_t count : {0, 1, 20}) {
    Rng rng(1);
    const std::vector<int64_t> out = ch14::generate(std::ref(model), 8, prompt, count, 1.0f, rng);
    INFO("count " << count << ": " << out.size() << " tokens back");
    REQUIRE(out.size() == prompt.size() + std::size_t(count));
    CHECK(std::equal(prompt.begin(), prompt.end(), out.begin()));
    CHECK(std::all_of(out.begin(), out.end(), [](int64_t t) { return t >= 0 && t < 3; }));
  }
}

TEST_CASE("generate: the model is never asked for more than its context, however long the prompt", "[ch14]") {
  for (int64_t context : {1, 4}) {
    RotatingScorer model{{0.0f, 3.0f, -1.0f, 0.5f}};
    std::vector<int64_t> prompt(std::size_t(3 * context + 1), 2);
    Rng rng(2);
    const std::vector<int64_t> out = ch14::generate(std::ref(model), context, prompt, 10, 1.0f, rng);
    INFO("context " << context << ", prompt of " << prompt.size() << ": the model was asked for " << model.longest
                    << " tokens at once (it accepts at most " << context << ")");
    CHECK(out.size() == prompt.size() + 10);
    CHECK(model.longest == context);  // at most the context, and all of it
  }
}

TEST_CASE("generate: temperature near 0 takes the model's most likely next token", "[ch14]") {
  // The most likely successor of t is t + 1 (base[1] is the largest): the
  // sequence counts up from the prompt's last token, whatever came before it.
  RotatingScorer model{{0.0f, 2.0f, 1.0f, -1.0f, 1.5f}};
  Rng rng(3);
  const std::vector<int64_t> prompt = {4, 4, 0, 2, 3};  // longer than the context; its last token is 3
  const std::vector<int64_t> out = ch14::generate(std::ref(model), 4, prompt, 12, 1e-3f, rng);
  REQUIRE(out.size() == prompt.size() + 12);
  for (std::size_t i = prompt.size(); i < out.size(); ++i) {
    INFO("token " << i << " follows " << out[i - 1]);
    CHECK(out[i] == (out[i - 1] + 1) % 5);
  }
}

TEST_CASE("generate: the draws follow the model's tempered distribution P ~ p^(1/temperature) (seeded, within 4.5 "
          "binomial deviations)",
          "[ch14]") {
  const std::vector<float> base = {0.0f, 2.0f, 1.0f, -1.0f, 0.5f, 1.2f};
  const int64_t V = int64_t(base.size()), n = 6000;
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    RotatingScorer model{base};
    Rng rng(4);
    const std::vector<int64_t> out = ch14::generate(std::ref(model), 8, {0}, n, temperature, rng);
    REQUIRE(out.size() == std::size_t(n + 1));
    std::vector<double> seen(std::size_t(V), 0.0);
    for (std::size_t i = 1; i < out.size(); ++i) seen[std::size_t(((out[i] - out[i - 1]) % V + V) % V)] += 1.0 / double(n);
    const std::vector<double> p = softmax(base, temperature);
    for (int64_t d = 0; d < V; ++d) {
      const double q = p[std::size_t(d)], sigma = std::sqrt(q * (1 - q) / double(n));
      INFO("temperature " << temperature << ": a step of +" << d << " seen " << seen[std::size_t(d)] << " of the time; "
                          << "the model's distribution at this temperature says " << q << " (σ = " << sigma << ")");
      CHECK(std::fabs(seen[std::size_t(d)] - q) <= 4.5 * sigma);
    }
  }
}

TEST_CASE("generate: each new token follows the model's prediction for that token, not for an earlier one", "[ch14]") {
  // The prediction after the first token always says "0", every later one
  // says "3": a sampler that draws from another prediction writes a 0.
  auto model = [](const std::vector<int64_t>& tokens) {
    std::vector<float> logits(tokens.size() * 4, -20.0f);
    for (std::size_t i = 0; i < tokens.size(); ++i) logits[i * 4 + (i == 0 ? 0 : 3)] = 20.0f;
    return Tensor::from_vector({int64_t(tokens.size()), 4}, logits, Device::host());
  };
  Rng rng(5);
  const std::vector<int64_t> out = ch14::generate(model, 6, {1, 2}, 10, 1.0f, rng);
  REQUIRE(out.size() == 12);
  INFO(10 - std::count(out.begin() + 2, out.end(), 3) << " of 10 new tokens were drawn from the prediction for "
                                                           "another token than the one being generated");
  CHECK(std::count(out.begin() + 2, out.end(), 3) == 10);
}

TEST_CASE("generate: the same seed gives the same text, and a temperature <= 0 is refused", "[ch14]") {
  RotatingScorer model{{0.0f, 1.0f, 0.3f, 0.7f}};
  Rng a(6), b(6);
  CHECK(ch14::generate(std::ref(model), 5, {1}, 30, 1.0f, a) == ch14::generate(std::ref(model), 5, {1}, 30, 1.0f, b));
  Rng c(7);
  CHECK_THROWS_AS(ch14::generate(std::ref(model), 5, {1}, 3, 0.0f, c), Error);
}
