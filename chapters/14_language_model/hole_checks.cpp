// hole_checks.cpp — chapter 14's verdicts on the holes (hole_checks.h). Each
// reference here is written out independently of the hole it judges: the
// attention as loops in double, LayerNorm's gradient by central differences
// of a double-precision forward, generate against a scorer whose
// distribution is known exactly.
#include "hole_checks.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "ch14.h"
#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/report.h"

using dpt::Tensor;
using dpt::Verdicts;

namespace {
std::vector<float> normals(std::size_t n, uint64_t seed, float mean = 0, float std = 1) {
  dpt::Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = mean + std * rng.normal();
  return v;
}
double relative_gap(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::nan("");
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    if (std::isnan(d)) return d;
    gap = std::max(gap, d), scale = std::max(scale, std::fabs(want[i]));
  }
  return gap / scale;
}

// ---- attention: y_i = Σ_{j ≤ i} softmax_j(q_i·k_j / √D) v_j, in double
constexpr int64_t kG = 2, kT = 5, kD = 3;  // T ≠ D: a transposed product cannot pass by shape

void check_attention(Verdicts& v) {
  const std::vector<float> q = normals(kG * kT * kD, 1), k = normals(kG * kT * kD, 2), val = normals(kG * kT * kD, 3);
  std::vector<double> want(q.size(), 0.0);
  for (int64_t g = 0; g < kG; ++g)
    for (int64_t i = 0; i < kT; ++i) {
      std::vector<double> s(std::size_t(i + 1));
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < kD; ++d) dot += double(q[std::size_t((g * kT + i) * kD + d)]) * k[std::size_t((g * kT + j) * kD + d)];
        s[std::size_t(j)] = dot / std::sqrt(double(kD));
      }
      const double top = *std::max_element(s.begin(), s.end());
      double total = 0;
      for (double& x : s) total += x = std::exp(x - top);
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t d = 0; d < kD; ++d)
          want[std::size_t((g * kT + i) * kD + d)] += s[std::size_t(j)] / total * val[std::size_t((g * kT + j) * kD + d)];
    }
  dpt::Device& host = dpt::Device::host();
  Tensor y = dpt::ch14::causal_attention(Tensor::from_vector({kG, kT, kD}, q, host),
                                         Tensor::from_vector({kG, kT, kD}, k, host),
                                         Tensor::from_vector({kG, kT, kD}, val, host));
  if (y.shape() != dpt::Shape({kG, kT, kD}))
    return v.holds("causal_attention returns (G, T, D)", false, "got " + dpt::shape_str(y.shape()));
  v.at_most("causal_attention = its definition written out (weighted average of earlier values), on random q, k, v "
            "(max |Δ| / max |y|)",
            relative_gap(y.to_vector(), want), 1e-5,
            "float against double: ~1e-7; a wrong scale, mask or softmax axis moves it by tenths");
}

// ---- LayerNorm: central differences of L = Σ dout ⊙ y, forward in double
constexpr int64_t kRows = 4, kC = 6;
constexpr double kEps = 1e-5;

double ln_loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
               const std::vector<float>& dout) {
  double loss = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    double m = 0, var = 0;
    for (int64_t j = 0; j < kC; ++j) m += x[std::size_t(r * kC + j)] / kC;
    for (int64_t j = 0; j < kC; ++j) var += (x[std::size_t(r * kC + j)] - m) * (x[std::size_t(r * kC + j)] - m) / kC;
    for (int64_t j = 0; j < kC; ++j)
      loss += dout[std::size_t(r * kC + j)] *
              ((x[std::size_t(r * kC + j)] - m) / std::sqrt(var + kEps) * w[std::size_t(j)] + b[std::size_t(j)]);
  }
  return loss;
}

// d loss / d p for every entry of `p` (one of x, w, b), by central differences.
std::vector<double> differences(std::vector<double>& p, const std::function<double()>& loss) {
  std::vector<double> out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double keep = p[i], h = 1e-5 * std::max(1.0, std::fabs(keep));
    p[i] = keep + h;
    const double up = loss();
    p[i] = keep - h;
    out[i] = (up - loss()) / (2 * h);
    p[i] = keep;
  }
  return out;
}

void check_layer_norm(Verdicts& v) {
  const std::vector<float> x = normals(kRows * kC, 4, 3.0f, 2.0f), w = normals(kC, 5, 1.0f, 0.5f),
                           b = normals(kC, 6), dout = normals(kRows * kC, 7);
  dpt::Device& host = dpt::Device::host();
  Tensor xt = Tensor::from_vector({kRows, kC}, x, host).set_requires_grad(true);
  Tensor wt = Tensor::from_vector({kC}, w, host).set_requires_grad(true);
  Tensor bt = Tensor::from_vector({kC}, b, host).set_requires_grad(true);
  dpt::backward(dpt::ch14::layer_norm(xt, wt, bt), Tensor::from_vector({kRows, kC}, dout, host));
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end());
  auto loss = [&] { return ln_loss(xd, wd, bd, dout); };
  const std::string why = "float against double differences: ~1e-6; a missing term of the derivative: tenths";
  v.at_most("layer_norm_backward: dx = finite differences of the forward (max |Δ| / max |dx|)",
            relative_gap(xt.grad().to_vector(), differences(xd, loss)), 1e-4, why);
  v.at_most("layer_norm_backward: dweight = finite differences (max |Δ| / max |dweight|)",
            relative_gap(wt.grad().to_vector(), differences(wd, loss)), 1e-4, why);
  v.at_most("layer_norm_backward: dbias = finite differences (max |Δ| / max |dbias|)",
            relative_gap(bt.grad().to_vector(), differences(bd, loss)), 1e-4, why);
}
}  // namespace

namespace {
// ---- generate, on a scorer whose answers are known: row i's scores are
// kBase rotated to start at tokens[i], so the token after t is t + d (mod V)
// with probability softmax(kBase / temperature)[d]. It refuses more than
// kContext tokens, as a GPT does.
constexpr int64_t kV = 5, kContext = 4;
const std::vector<float> kBase = {0.0f, 2.0f, 1.0f, -1.0f, 0.5f};

struct KnownScorer {
  int64_t longest = 0;  // the most tokens it was asked for
  Tensor operator()(const std::vector<int64_t>& tokens) {
    longest = std::max(longest, int64_t(tokens.size()));
    DPT_CHECK(!tokens.empty() && int64_t(tokens.size()) <= kContext,
              "the test model was asked for " << tokens.size() << " tokens; its context is " << kContext);
    std::vector<float> logits(tokens.size() * kV);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      for (int64_t d = 0; d < kV; ++d) logits[i * kV + std::size_t(((tokens[i] % kV) + kV + d) % kV)] = kBase[std::size_t(d)];
    return Tensor::from_vector({int64_t(tokens.size()), kV}, logits, dpt::Device::host());
  }
};

// Runs `probe`, turning a dpt::Error from the hole into a ✘ naming it.
void or_error(Verdicts& v, const std::string& what, const std::function<void()>& probe) {
  try {
    probe();
  } catch (const dpt::NotImplemented&) {
    throw;
  } catch (const dpt::Error& e) {
    v.holds(what, false, std::string("threw: ") + e.what());
  }
}

void check_generate(Verdicts& v) {
  using dpt::ch14::generate;
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 0, 2, 2, 3};  // twice the context
  or_error(v, "generate keeps the prompt, adds count tokens, asks for at most the context", [&] {
    KnownScorer model;
    dpt::Rng rng(11);
    const std::vector<int64_t> out = generate(std::ref(model), kContext, prompt, 6, 1.0f, rng);
    const bool kept = out.size() == prompt.size() + 6 && std::equal(prompt.begin(), prompt.end(), out.begin());
    v.holds("generate returns the prompt, unchanged, then count new tokens", kept,
            dpt::str(out.size(), " tokens for a prompt of ", prompt.size(), " and count 6"));
    v.holds("generate asks the model for at most its context (a prompt of twice the context)", model.longest <= kContext,
            dpt::str("asked for ", model.longest, " tokens; context ", kContext));
  });
  or_error(v, "generate at temperature 0.01 follows the last position's most likely token", [&] {
    KnownScorer model;
    dpt::Rng rng(12);
    const std::vector<int64_t> out = generate(std::ref(model), kContext, prompt, 12, 0.01f, rng);
    int64_t wrong = 0;  // kBase's largest is d = 1: each new token is the one before it plus 1
    for (std::size_t i = prompt.size(); i < out.size(); ++i) wrong += out[i] != (out[i - 1] + 1) % kV;
    v.holds("generate at temperature 0.01 follows the last position's most likely token", wrong == 0 && out.size() > prompt.size(),
            dpt::str(wrong, " of ", out.size() - prompt.size(), " new tokens were not the last token's most likely successor"));
  });
  or_error(v, "generate's draws follow softmax(logits / temperature)", [&] {
    KnownScorer model;
    dpt::Rng rng(13);
    const int64_t n = 4000;
    const float temperature = 2.0f;
    const std::vector<int64_t> out = generate(std::ref(model), kContext, {0}, n, temperature, rng);
    std::vector<double> p(kV), seen(kV, 0.0);
    double total = 0;
    for (int64_t d = 0; d < kV; ++d) total += p[std::size_t(d)] = std::exp(double(kBase[std::size_t(d)]) / temperature);
    for (std::size_t i = 1; i < out.size(); ++i) seen[std::size_t(((out[i] - out[i - 1]) % kV + kV) % kV)] += 1.0 / double(n);
    double worst = 0;  // in binomial standard deviations
    for (int64_t d = 0; d < kV; ++d) {
      const double q = p[std::size_t(d)] / total;
      worst = std::max(worst, std::fabs(seen[std::size_t(d)] - q) / std::sqrt(q * (1 - q) / double(n)));
    }
    v.at_most("generate's draws follow softmax(logits / temperature): 4000 draws at temperature 2, the worst "
              "|frequency − p| in binomial standard deviations",
              out.size() == std::size_t(n + 1) ? worst : std::nan(""), 4.5,
              "a fair draw stays within 4.5σ but once in ~10⁵ seeds; a temperature multiplied, or another "
              "position's scores, is off by tens of σ");
  });
}
}  // namespace

HoleStatus check_holes(dpt::Holes& holes, Verdicts& verdicts) {
  HoleStatus s;
  bool threw = false;
  s.attention = holes.run_here([&] {
    try {
      check_attention(verdicts);
    } catch (const dpt::NotImplemented&) {
      throw;
    } catch (const dpt::Error& e) {
      threw = true;
      verdicts.holds("causal_attention runs on (G, T, D) inputs", false, std::string("threw: ") + e.what());
    }
  });
  s.attention = s.attention && !threw;  // a hole that throws cannot run the model either
  threw = false;
  s.layer_norm = holes.run_here([&] {
    try {
      check_layer_norm(verdicts);
    } catch (const dpt::NotImplemented&) {
      throw;
    } catch (const dpt::Error& e) {
      threw = true;
      verdicts.holds("layer_norm_backward runs on (rows, C) inputs", false, std::string("threw: ") + e.what());
    }
  });
  s.layer_norm = s.layer_norm && !threw;
  s.generate = holes.run_here([&] { check_generate(verdicts); });
  return s;
}

void check_causality(Verdicts& v, const Gpt& model, const TextData& text) {
  dpt::NoGradGuard no_grad;
  const int64_t T = model.shape().context, V = model.shape().vocab, t = T / 2;
  const std::string what = "the trained model's logits at earlier positions ignore every later token";
  if (t < 1) return v.cannot_fail(what, "with a context of 1 (no earlier position; try --context 8)");
  if (int64_t(text.held_out.size()) < T) return v.cannot_fail(what, "the held-out text is shorter than one window");
  std::vector<int64_t> tokens(text.held_out.begin(), text.held_out.begin() + T);
  const std::vector<float> before = model.forward(tokens, 1).to_vector();
  for (int64_t i = t; i < T; ++i) tokens[std::size_t(i)] = (tokens[std::size_t(i)] + 1) % V;
  const std::vector<float> after = model.forward(tokens, 1).to_vector();
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < std::size_t(t * V); ++i)
    gap = std::max(gap, double(std::fabs(before[i] - after[i]))), scale = std::max(scale, double(std::fabs(before[i])));
  v.at_most(dpt::str("the trained model's logits at positions < ", t, " ignore every token from ", t,
                     " on (changed: max |Δ| / max |logit|)"),
            gap / scale, 1e-6, "the future's probabilities are exactly 0: the same sums, ~0; a leak moves them by 1e-3 or more");
}
