// test_ch02_passes.cpp — chapter 02's accumulated_gradient by how it runs:
// the samples each of its backward passes saw, read from outside with a
// grad-ready hook, against the contract's cut (exactly K consecutive pieces,
// none larger than ceil(B/K), every sample once).
#include "support/catch.h"

#include <sstream>
#include <string>
#include <vector>

#include "ch02.h"
#include "dpt/nn.h"
#include "dpt/ops.h"

using namespace dpt;

namespace {
// What each backward pass of accumulated_gradient saw, observed from outside.
// Sample i of this batch is the unit vector e_i of R^10 (D = B = 10), so the
// first layer's weight gradient dW[o][i] = Σ_b dy[b][o] · x[b][i] gets column
// i from sample i alone. A grad-ready hook on fc0.weight fires once per
// backward() (when that pass's gradient has been added) and reads which
// columns have just changed to a non-zero value: the samples of that pass.
struct UnitSamples {
  Rng rng{21};
  MLP model{{10, 32, 4}, Device::host(), rng};
  Batch batch;
  UnitSamples() {
    batch.x = Tensor::zeros({10, 10}, Device::host());
    for (int64_t i = 0; i < 10; ++i) batch.x.data()[i * 10 + i] = 1.0f;
    batch.y = {0, 3, 1, 2, 3, 1, 0, 2, 2, 3};
  }
};

std::vector<std::vector<int64_t>> passes_of(UnitSamples& f, int k) {
  Tensor weight = f.model.parameters()[0];  // fc0.weight, (32, 10)
  const int64_t out = weight.size(0), in = weight.size(1);
  std::vector<std::vector<int64_t>> passes;
  std::vector<float> previous(std::size_t(out * in), 0.0f);
  weight.add_grad_ready_hook([&](Tensor& p) {
    std::vector<float> g = p.grad().to_vector();
    std::vector<int64_t> samples;
    for (int64_t i = 0; i < in; ++i) {
      bool changed = false, nonzero = false;
      for (int64_t o = 0; o < out; ++o) {
        const std::size_t j = std::size_t(o * in + i);
        changed |= g[j] != previous[j];
        nonzero |= g[j] != 0;
      }
      if (changed && nonzero) samples.push_back(i);
    }
    passes.push_back(samples);
    previous = g;
  });
  struct Unhook {
    Tensor& w;
    ~Unhook() { w.clear_grad_ready_hooks(); }
  } unhook{weight};
  for (auto& p : f.model.parameters()) p.zero_grad();
  ch02::accumulated_gradient(f.model, f.batch, k);
  return passes;
}

std::string passes_str(const std::vector<std::vector<int64_t>>& passes) {
  std::ostringstream s;
  for (const auto& pass : passes) {
    s << " {";
    for (std::size_t j = 0; j < pass.size(); ++j) s << (j ? " " : "") << pass[j];
    s << "}";
  }
  return s.str();
}
}  // namespace

TEST_CASE("accumulated_gradient: exactly K passes, over consecutive pieces of at most ceil(B/K) samples", "[ch02]") {
  UnitSamples f;
  // The fixture itself: every sample's own gradient reaches its column, so a
  // pass that holds sample i shows it.
  for (int64_t i = 0; i < 10; ++i) {
    for (auto& p : f.model.parameters()) p.zero_grad();
    softmax_cross_entropy(f.model.forward(f.batch.x.rows(i, i + 1)), {f.batch.y[std::size_t(i)]}).backward();
    std::vector<float> g = f.model.parameters()[0].grad().to_vector();
    bool nonzero = false;
    for (int64_t o = 0; o < 32; ++o) nonzero |= g[std::size_t(o * 10 + i)] != 0;
    INFO("test fixture: sample " << i << "'s gradient must reach column " << i << " of fc0.weight");
    REQUIRE(nonzero);
  }
  for (int k : {1, 3, 4, 6, 7, 10}) {
    const int64_t most = (10 + k - 1) / k;  // ceil(B/K)
    std::vector<std::vector<int64_t>> passes = passes_of(f, k);
    INFO("10 samples, K = " << k << " micro-batches; the samples each of your backward passes saw, in order:"
                            << passes_str(passes));
    if (int(passes.size()) != k)
      FAIL("your accumulated_gradient ran " << passes.size()
           << (passes.size() == 1 ? " backward pass" : " backward passes")
           << " (counted by a grad-ready hook on fc0.weight), not K = " << k
           << ": the contract asks for exactly K micro-batches, each one forward and one backward, none larger "
              "than ceil(B/K) = " << most << " samples");
    std::vector<int> times(10, 0);
    for (const auto& pass : passes) {
      for (int64_t i : pass) ++times[std::size_t(i)];
      if (pass.empty()) FAIL("a backward pass saw no sample: every micro-batch holds at least one");
      if (pass.back() - pass.front() + 1 != int64_t(pass.size()))
        FAIL("a pass saw samples" << passes_str({pass}) << ": a micro-batch is consecutive samples of the batch");
      if (int64_t(pass.size()) > most)
        FAIL("a pass saw " << pass.size() << " samples" << passes_str({pass}) << ", more than ceil(B/K) = " << most
             << ": no micro-batch may be larger than that (its activations are what must fit in memory)");
    }
    for (int64_t i = 0; i < 10; ++i)
      if (times[std::size_t(i)] != 1)
        FAIL("sample " << i << " was in " << times[std::size_t(i)] << " passes: the micro-batches together hold "
             "every sample of the batch exactly once");
  }
}
