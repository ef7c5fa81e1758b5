// solutions/14_language_model/sample.cpp — generation: crop to the last
// `context` tokens, take the last position's logits, divide by the
// temperature, draw from their softmax by inverting its cumulative sum.
#include <algorithm>
#include <cmath>

#include "ch14.h"
#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch14 {

std::vector<int64_t> generate(const NextTokenScores& model, int64_t context, const std::vector<int64_t>& prompt,
                              int64_t count, float temperature, Rng& rng) {
  DPT_CHECK(!prompt.empty(), "generate: the prompt is empty");
  DPT_CHECK(context >= 1, "generate: the context must be at least 1 token, got " << context);
  DPT_CHECK(temperature > 0, "generate: the temperature must be positive, got " << temperature);
  NoGradGuard no_grad;
  std::vector<int64_t> tokens = prompt;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = std::min<int64_t>(context, int64_t(tokens.size()));
    const std::vector<int64_t> window(tokens.end() - n, tokens.end());
    const std::vector<float> logits = model(window).rows(n - 1, n).to_vector();  // the last position's
    const float top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double total = 0;
    for (std::size_t v = 0; v < p.size(); ++v) total += p[v] = std::exp(double(logits[v] - top) / temperature);
    double r = double(rng.uniform()) * total;
    int64_t next = int64_t(p.size()) - 1;
    for (std::size_t v = 0; v < p.size(); ++v)
      if ((r -= p[v]) < 0) {
        next = int64_t(v);
        break;
      }
    tokens.push_back(next);
  }
  return tokens;
}

}  // namespace dpt::ch14
