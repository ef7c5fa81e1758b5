// sample.cpp — generation (sample.h).
#include "sample.h"

#include <algorithm>
#include <cmath>

#include "dpt/autograd.h"
#include "dpt/check.h"

std::vector<int64_t> generate(const Gpt& model, const std::vector<int64_t>& prompt, int64_t count, float temperature,
                              dpt::Rng& rng) {
  DPT_CHECK(!prompt.empty(), "generate: the prompt is empty");
  dpt::NoGradGuard no_grad;
  std::vector<int64_t> tokens = prompt;
  const int64_t T = model.shape().context, V = model.shape().vocab;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = std::min<int64_t>(T, int64_t(tokens.size()));
    std::vector<int64_t> window(tokens.end() - n, tokens.end());
    std::vector<float> logits = model.forward(window, 1).rows(n - 1, n).to_vector();
    const float top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(static_cast<std::size_t>(V));
    double total = 0;
    for (int64_t v = 0; v < V; ++v) total += p[std::size_t(v)] = std::exp(double(logits[std::size_t(v)] - top) / temperature);
    double r = double(rng.uniform()) * total;
    int64_t next = V - 1;
    for (int64_t v = 0; v < V; ++v)
      if ((r -= p[std::size_t(v)]) < 0) { next = v; break; }
    tokens.push_back(next);
  }
  return tokens;
}
