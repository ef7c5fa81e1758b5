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

// ---- attention: its laws on inputs built to expose each, then the
// definition y_i = Σ_{j ≤ i} softmax_j(q_i·k_j / √D) v_j in double.
constexpr int64_t kG = 2, kT = 5, kD = 3;  // T ≠ D: a transposed product cannot pass by shape

Tensor attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int64_t G,
              int64_t T, int64_t D) {
  dpt::Device& host = dpt::Device::host();
  return dpt::ch14::causal_attention(Tensor::from_vector({G, T, D}, q, host), Tensor::from_vector({G, T, D}, k, host),
                                     Tensor::from_vector({G, T, D}, v, host));
}

// The largest change of a row in `rows` between two outputs (G, T, D).
double moved(const std::vector<float>& a, const std::vector<float>& b, const std::function<bool(int64_t)>& rows) {
  if (a.size() != b.size()) return std::nan("");
  double most = 0;
  for (std::size_t e = 0; e < a.size(); ++e)
    if (rows(int64_t(e) / kD % kT)) most = std::max(most, double(std::fabs(a[e] - b[e])));
  return most;
}

void check_attention_laws(Verdicts& v, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& val, const std::vector<float>& y) {
  // Causal: every q, k, v after position i changed, rows ≤ i measured.
  double later = 0, others = 0;
  for (int64_t i = 0; i < kT; ++i) {
    std::vector<float> q2 = q, k2 = k, v2 = val, q3 = q;
    for (std::size_t e = 0; e < q.size(); ++e) {
      const int64_t t = int64_t(e) / kD % kT;
      if (t > i) q2[e] += 1.5f, k2[e] -= 2.0f, v2[e] *= -3.0f;
      if (t != i) q3[e] = -2.0f * q3[e] + 1.0f;
    }
    const double a = moved(attend(q2, k2, v2, kG, kT, kD).to_vector(), y, [i](int64_t t) { return t <= i; });
    const double b = moved(attend(q3, k, val, kG, kT, kD).to_vector(), y, [i](int64_t t) { return t == i; });
    later = std::isnan(a) || a > later ? a : later, others = std::isnan(b) || b > others ? b : others;
  }
  v.at_most("causal_attention: row i ignores positions after i (their q, k, v changed: max |Δ| of rows ≤ i)", later, 1e-6,
            "weight 0 on the future: the same sums, bit for bit; a position that reads ahead moves by tenths");
  v.at_most("causal_attention: a query at position i is scored against the keys of positions j ≤ i (the other "
            "positions' queries changed: max |Δ| of row i)",
            others, 1e-6, "row i reads only its own query: bit for bit; a key scored against the queries moves it");
  // Unit-variance scores: position 1 of 4000 heads (D = 16) reads positions 0
  // and 1, values one-hot, so y[g, 1] holds the two weights; their log-odds
  // is a difference of two scores with independent keys: twice their variance.
  const int64_t G = 4000, T = 2, D = 16;
  const std::vector<float> a = normals(std::size_t(G * T * D), 21), b = normals(std::size_t(G * T * D), 22);
  std::vector<float> onehot(std::size_t(G * T * D), 0.0f);
  for (int64_t g = 0; g < G; ++g) onehot[std::size_t(g * T * D)] = 1.0f, onehot[std::size_t((g * T + 1) * D + 1)] = 1.0f;
  const std::vector<float> w = attend(a, b, onehot, G, T, D).to_vector();
  double sum = 0, squares = 0;
  for (int64_t g = 0; g < G && w.size() == onehot.size(); ++g) {
    const double odds = std::log(double(w[std::size_t((g * T + 1) * D)]) / double(w[std::size_t((g * T + 1) * D + 1)]));
    sum += odds, squares += odds * odds;
  }
  const double variance = w.size() == onehot.size() ? (squares / G - (sum / G) * (sum / G)) / 2 : std::nan("");
  v.at_most("causal_attention: the scores of unit-variance q and k have variance 1 (4000 heads, D = 16: |variance − 1|)",
            std::fabs(variance - 1.0), 0.15, "4000 heads estimate it within ~3 %");
}

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
  Tensor y = attend(q, k, val, kG, kT, kD);
  if (y.shape() != dpt::Shape({kG, kT, kD}))
    return v.holds("causal_attention returns (G, T, D)", false, "got " + dpt::shape_str(y.shape()));
  check_attention_laws(v, q, k, val, y.to_vector());
  v.at_most("causal_attention = an oracle written as loops in double, on random q, k, v (max |Δ| / max |y|)",
            relative_gap(y.to_vector(), want), 1e-5,
            "float against double: ~1e-7; any law above broken moves it by tenths");
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
// with probability softmax(kBase / temperature)[d]. It answers more than
// kContext tokens (a GPT refuses them) and remembers the longest request,
// so a window not cropped fails the verdict about the context alone.
constexpr int64_t kV = 5, kContext = 4;
const std::vector<float> kBase = {0.0f, 2.0f, 1.0f, -1.0f, 0.5f};

struct KnownScorer {
  int64_t longest = 0;  // the most tokens it was asked for
  Tensor operator()(const std::vector<int64_t>& tokens) {
    longest = std::max(longest, int64_t(tokens.size()));
    DPT_CHECK(!tokens.empty(), "the test model was asked for no tokens");
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
  or_error(v, "generate at temperature 0.01 takes the model's most likely next token", [&] {
    KnownScorer model;
    dpt::Rng rng(12);
    const std::vector<int64_t> out = generate(std::ref(model), kContext, prompt, 12, 0.01f, rng);
    int64_t wrong = 0;  // kBase's largest is d = 1: each new token is the one before it plus 1
    for (std::size_t i = prompt.size(); i < out.size(); ++i) wrong += out[i] != (out[i - 1] + 1) % kV;
    v.holds("generate at temperature 0.01 takes the model's most likely next token", wrong == 0 && out.size() > prompt.size(),
            dpt::str(wrong, " of ", out.size() - prompt.size(), " new tokens were not the model's most likely next token"));
  });
  or_error(v, "generate's draws follow the model's tempered distribution", [&] {
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
    v.at_most("generate's draws follow the model's tempered distribution P ∝ p^(1/τ): 4000 draws at τ = 2, the worst "
              "|frequency − P| in binomial standard deviations",
              out.size() == std::size_t(n + 1) ? worst : std::nan(""), 4.5,
              "a fair draw stays within 4.5σ but once in ~10⁵ seeds; a draw from another distribution (another "
              "temperature, another token's prediction) is off by tens of σ");
  });
}
}  // namespace

namespace {
// Runs one hole's checks: false when it is not written yet (recorded in
// `holes`); a dpt::Error from it is a ✘ saying it threw. `failed` says
// whether any of its verdicts failed.
bool run_checks(dpt::Holes& holes, Verdicts& verdicts, const std::string& ran_what, const std::function<void()>& checks,
                bool& failed) {
  const int before = verdicts.failures();
  const bool ran = holes.run_here([&] {
    try {
      checks();
    } catch (const dpt::NotImplemented&) {
      throw;
    } catch (const dpt::Error& e) {
      verdicts.holds(ran_what, false, std::string("threw: ") + e.what());
    }
  });
  failed = verdicts.failures() > before;
  return ran;
}
}  // namespace

HoleStatus check_holes(dpt::Holes& holes, Verdicts& verdicts) {
  HoleStatus s;
  bool failed = false;
  s.attention = run_checks(holes, verdicts, "causal_attention runs on (G, T, D) inputs", [&] { check_attention(verdicts); }, failed);
  if (failed) s.failed.push_back("causal_attention");
  s.layer_norm = run_checks(holes, verdicts, "layer_norm_backward runs on (rows, C) inputs", [&] { check_layer_norm(verdicts); }, failed);
  if (failed) s.failed.push_back("layer_norm_backward");
  s.generate = run_checks(holes, verdicts, "generate runs", [&] { check_generate(verdicts); }, failed);
  if (failed) s.failed.push_back("generate");
  return s;
}

void check_causality(Verdicts& v, const Gpt& model, const Corpus& text) {
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
