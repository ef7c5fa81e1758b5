// test_evaluate.cpp — scoring a model (against a per-sample oracle in double
// precision), that scoring never touches training state, and that the
// held-out set never shares a sample with the training set.
#include "support/catch.h"

#include <cmath>
#include <fstream>
#include <set>

#include "dpt/evaluate.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/options.h"
#include "support/folder.h"  // read_file, write_file
#include "support/run_program.h"

using namespace dpt;

namespace {
// The oracle: each sample on its own, in double, straight from the weights
// (y = x·Wᵀ + b, ReLU between layers, log-softmax by hand). Shares nothing
// with evaluate() but the weights.
Evaluation per_sample_oracle(const MLP& model, const Dataset& data) {
  Evaluation e;
  const int64_t n = data.size();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> h(data.x.data() + i * data.features(), data.x.data() + (i + 1) * data.features());
    const auto& layers = model.layers();
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const Tensor& w = layers[l].weight;  // (out, in)
      std::vector<double> out(std::size_t(w.size(0)));
      for (int64_t o = 0; o < w.size(0); ++o) {
        double sum = layers[l].bias.data()[o];
        for (int64_t k = 0; k < w.size(1); ++k) sum += w.data()[o * w.size(1) + k] * h[std::size_t(k)];
        out[std::size_t(o)] = l + 1 < layers.size() ? std::max(sum, 0.0) : sum;
      }
      h = out;
    }
    double top = *std::max_element(h.begin(), h.end()), z = 0;
    for (double v : h) z += std::exp(v - top);
    e.loss += (top + std::log(z) - h[std::size_t(data.y[i])]) / double(n);
    e.accuracy += (std::max_element(h.begin(), h.end()) - h.begin() == data.y[i]) / double(n);
  }
  return e;
}

Dataset random_dataset(int64_t n, int64_t features, int64_t classes, uint64_t seed) {
  Rng rng(seed);
  Dataset d;
  d.classes = classes;
  d.x = Tensor::empty({n, features}, Device::host());
  for (int64_t i = 0; i < d.x.numel(); ++i) d.x.data()[i] = rng.normal();
  for (int64_t i = 0; i < n; ++i) d.y.push_back(int64_t(rng.below(uint64_t(classes))));
  return d;
}

// IDX by the spec (see test_data.cpp): header, then bytes.
std::string filled_idx_bytes(const std::vector<uint32_t>& dims, uint8_t fill) {
  std::string out = {0, 0, 0x08, char(dims.size())};
  std::size_t count = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out += char((d >> shift) & 0xff);
    count *= d;
  }
  return out + std::string(count, char(fill));
}
using dpt_test::write_file;
}  // namespace

// ----------------------------------------------------------------------------
// scoring

TEST_CASE("evaluate equals a per-sample double-precision oracle, whatever the chunk size", "[evaluate]") {
  Rng rng(1);
  MLP model({6, 5, 4}, Device::cpu(0), rng);
  Dataset data = random_dataset(10, 6, 4, 2);
  Evaluation want = per_sample_oracle(model, data);
  REQUIRE(want.accuracy > 0);
  REQUIRE(want.accuracy < 1);  // a score that can be wrong both ways
  // 10 = 3 + 3 + 3 + 1: a last partial chunk weighted like a full one is off by far more than float rounding.
  for (int64_t chunk : {1, 3, 4, 10, 1024}) {
    CAPTURE(chunk);
    Evaluation got = evaluate(model, data, chunk);
    // float32 forward over 6 and 5 terms, then a mean of 10: ~1e-6 relative; 1e-5 leaves room.
    CHECK(got.loss == Approx(want.loss).epsilon(1e-5));
    CHECK(got.accuracy == Approx(want.accuracy).epsilon(1e-12));
  }
}

TEST_CASE("evaluate touches no weight and no gradient", "[evaluate]") {
  Rng rng(3);
  MLP model({6, 8, 3}, Device::cpu(0), rng);
  std::vector<std::vector<float>> weights, grads;
  for (Tensor& p : model.parameters()) {
    Tensor g = Tensor::empty(p.shape(), p.device());
    for (int64_t i = 0; i < g.numel(); ++i) g.data()[i] = 0.25f * float(i % 7);  // a gradient in flight
    p.set_grad(g);
    weights.push_back(p.to_vector());
    grads.push_back(g.to_vector());
  }
  evaluate(model, random_dataset(50, 6, 3, 4), 16);
  auto params = model.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    CAPTURE(k);
    CHECK(params[k].to_vector() == weights[k]);
    REQUIRE(params[k].grad().defined());
    CHECK(params[k].grad().to_vector() == grads[k]);  // a backward() inside evaluate would add to these
  }
}

TEST_CASE("evaluate refuses data that does not fit the model, with a sentence", "[evaluate]") {
  Rng rng(5);
  MLP model({6, 3}, Device::cpu(0), rng);
  CHECK_THROWS_WITH(evaluate(model, random_dataset(4, 7, 3, 1)), contains_text("6 inputs on data with 7 features"));
  CHECK_THROWS_WITH(evaluate(model, Dataset{}), contains_text("empty data set"));
}

// ----------------------------------------------------------------------------
// the held-out set never shares a sample with the training set

TEST_CASE("held-out images come from the t10k files only, training images from the train files only", "[evaluate]") {
  std::string dir = dpt_test::temp_path("split");
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  // Every training pixel is 10, every test pixel 200: a row tells which file it came from.
  write_file(dir + "/train-images-idx3-ubyte", filled_idx_bytes({30, 4, 4}, 10));
  write_file(dir + "/train-labels-idx1-ubyte", filled_idx_bytes({30}, 1));
  write_file(dir + "/t10k-images-idx3-ubyte", filled_idx_bytes({20, 4, 4}, 200));
  write_file(dir + "/t10k-labels-idx1-ubyte", filled_idx_bytes({20}, 7));
  Options o;
  o.data = "mnist:" + dir;
  o.model = "16-8-10";
  o.samples = 25;
  o.eval_samples = 12;
  Dataset train = load_dataset(o);
  HeldOut held_out = load_held_out(o, train);
  auto pixel = [](uint8_t v) { return float((v / 255.0f - 0.1307f) / 0.3081f); };
  REQUIRE(train.size() == 25);
  REQUIRE(held_out.data.size() == 12);
  CHECK(std::set<float>(train.x.data(), train.x.data() + train.x.numel()) == std::set<float>{pixel(10)});
  CHECK(std::set<int64_t>(train.y.begin(), train.y.end()) == std::set<int64_t>{1});
  const Tensor& hx = held_out.data.x;
  CHECK(std::set<float>(hx.data(), hx.data() + hx.numel()) == std::set<float>{pixel(200)});
  CHECK(std::set<int64_t>(held_out.data.y.begin(), held_out.data.y.end()) == std::set<int64_t>{7});
  CHECK_THAT(held_out.description, contains_text("test split (t10k), 12 images"));
  o.eval_samples = 0;
  CHECK_FALSE(load_held_out(o, train).enabled());
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("synthetic held-out set: new inputs, same teacher — a model trained on the training set generalises to it",
          "[evaluate]") {
  Options o;
  o.model = "16-64-4";
  o.samples = 4000;
  o.eval_samples = 1000;
  o.seed = 11;
  Dataset train = load_dataset(o);
  HeldOut held_out = load_held_out(o, train);
  REQUIRE(held_out.data.size() == 1000);
  // No held-out input is a training input (compare each row's first value; N(0,1) floats collide with ~0 chance).
  std::set<float> seen;
  for (int64_t i = 0; i < train.size(); ++i) seen.insert(train.x.data()[i * 16]);
  for (int64_t i = 0; i < held_out.data.size(); ++i) CHECK(seen.count(held_out.data.x.data()[i * 16]) == 0);
  // Same flags, same held-out set.
  CHECK(load_held_out(o, train).data.y == held_out.data.y);

  Rng rng(o.seed);
  MLP model(o.widths(), Device::cpu(0), rng);
  auto optimizer = make_optimizer("momentum", model.parameters(), 0.05f);
  BatchSampler sampler(train.size(), 64, true, o.seed);
  for (int64_t step = 0; step < 600; ++step) {
    Batch b = gather_batch(train, sampler.indices(step), Device::cpu(0));
    optimizer->zero_grad();
    softmax_cross_entropy(model.forward(b.x), b.y).backward();
    optimizer->step();
  }
  HeldOutScore score = score_held_out(model, train, held_out);
  // Chance is 25% (4 balanced classes). Measured: 0.89 on training, 0.84 held
  // out. A held-out set labelled by another teacher (planted: teacher seed + 1)
  // scores 0.31: near chance, far below 0.7.
  CHECK(score.train.accuracy > 0.8);
  CHECK(score.test.accuracy > 0.7);
  CHECK(score.test.accuracy <= score.train.accuracy + 0.02);  // held out: no better than seen data, give or take
}
