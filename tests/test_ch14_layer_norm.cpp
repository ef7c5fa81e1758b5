// test_ch14_layer_norm.cpp — chapter 14's LayerNorm backward: equal to
// central differences of the forward (written out here in double), to the
// core's dpt::layer_norm (a kernel of its own, sharing no code with the
// hole), and the laws the derivative must obey: with weight 1 a row's dx sums
// to 0 and is orthogonal to the normalized row, and a weight shared by every
// row collects every row's share.
#include "support/catch.h"
#include "support/relative_gap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ch14.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"

using namespace dpt;

using dpt_test::relative_gap;

namespace {
std::vector<float> row_normals(int64_t n, uint64_t seed, float mean = 0.0f, float std = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = mean + std * rng.normal();
  return v;
}
Tensor leaf(const Shape& shape, const std::vector<float>& values) {
  return Tensor::from_vector(shape, values, Device::host()).set_requires_grad(true);
}

struct Grads {
  std::vector<float> dx, dweight, dbias;
};
// Backward of L = Σ dout ⊙ layer_norm(x) through the chapter's op (your hole) or the core's.
Grads grads_of(bool chapter, const Shape& shape, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& b, const std::vector<float>& dout) {
  const int64_t C = shape.back();
  Tensor xt = leaf(shape, x), wt = leaf({C}, w), bt = leaf({C}, b);
  Tensor y = chapter ? ch14::layer_norm(xt, wt, bt) : dpt::layer_norm(xt, wt, bt);
  backward(y, Tensor::from_vector(shape, dout, Device::host()));
  REQUIRE(xt.grad().defined());
  REQUIRE(wt.grad().defined());
  REQUIRE(bt.grad().defined());
  return {xt.grad().to_vector(), wt.grad().to_vector(), bt.grad().to_vector()};
}

// L = Σ dout ⊙ (x̂ ⊙ w + b) in double, rows of C.
double loss_by_loops(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                     const std::vector<float>& dout, int64_t C) {
  double loss = 0;
  for (std::size_t r = 0; r < x.size() / std::size_t(C); ++r) {
    double m = 0, var = 0;
    for (int64_t j = 0; j < C; ++j) m += x[r * C + j] / double(C);
    for (int64_t j = 0; j < C; ++j) var += (x[r * C + j] - m) * (x[r * C + j] - m) / double(C);
    for (int64_t j = 0; j < C; ++j)
      loss += double(dout[r * C + j]) * ((x[r * C + j] - m) / std::sqrt(var + 1e-5) * w[j] + b[j]);
  }
  return loss;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }
}  // namespace

TEST_CASE("layer_norm_backward: dx, dweight and dbias equal central differences of the forward", "[ch14]") {
  const int64_t R = 5, C = 7;
  const std::vector<float> x = row_normals(R * C, 1, 2.0f, 3.0f), w = row_normals(C, 2, 1.0f, 0.5f), b = row_normals(C, 3),
                           dout = row_normals(R * C, 4);
  const Grads g = grads_of(true, {R, C}, x, w, b, dout);
  std::vector<double> p[3] = {widen(x), widen(w), widen(b)};
  const std::vector<float>* got[3] = {&g.dx, &g.dweight, &g.dbias};
  const char* names[3] = {"dx", "dweight", "dbias"};
  for (int which = 0; which < 3; ++which) {
    std::vector<double> numeric(p[which].size());
    for (std::size_t i = 0; i < p[which].size(); ++i) {
      const double keep = p[which][i], h = 1e-5 * std::max(1.0, std::fabs(keep));
      p[which][i] = keep + h;
      const double up = loss_by_loops(p[0], p[1], p[2], dout, C);
      p[which][i] = keep - h;
      numeric[i] = (up - loss_by_loops(p[0], p[1], p[2], dout, C)) / (2 * h);
      p[which][i] = keep;
    }
    INFO(names[which] << " against differences in double (float rounding ~1e-6 of the largest entry)");
    CHECK(relative_gap(*got[which], numeric) <= 1e-4);
  }
}

TEST_CASE("layer_norm_backward: equals the core's dpt::layer_norm backward on (B, T, C) activations", "[ch14]") {
  const int64_t B = 3, T = 4, C = 16;
  const std::vector<float> x = row_normals(B * T * C, 5, -1.0f, 0.7f), w = row_normals(C, 6, 1.0f, 0.3f), b = row_normals(C, 7),
                           dout = row_normals(B * T * C, 8);
  const Grads mine = grads_of(true, {B, T, C}, x, w, b, dout), core = grads_of(false, {B, T, C}, x, w, b, dout);
  CHECK(relative_gap(mine.dx, widen(core.dx)) <= 1e-5);  // two float computations: a few roundings apart
  CHECK(relative_gap(mine.dweight, widen(core.dweight)) <= 1e-5);
  CHECK(relative_gap(mine.dbias, widen(core.dbias)) <= 1e-5);
}

TEST_CASE("layer_norm_backward: with weight 1, each row of dx sums to 0 and is orthogonal to the normalized row",
          "[ch14]") {
  // y does not change when x moves along (1, …, 1) (the mean absorbs it) or
  // along x̂ (rstd absorbs it): dx has no component along either.
  const int64_t R = 6, C = 10;
  const std::vector<float> x = row_normals(R * C, 9, 4.0f, 2.0f), ones(std::size_t(C), 1.0f), zeros(std::size_t(C), 0.0f),
                           dout = row_normals(R * C, 10);
  const Grads g = grads_of(true, {R, C}, x, ones, zeros, dout);
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, var = 0, sum = 0, along = 0, size = 0;
    for (int64_t j = 0; j < C; ++j) m += x[std::size_t(r * C + j)] / double(C);
    for (int64_t j = 0; j < C; ++j) var += (x[std::size_t(r * C + j)] - m) * (x[std::size_t(r * C + j)] - m) / double(C);
    for (int64_t j = 0; j < C; ++j) {
      const double dx = g.dx[std::size_t(r * C + j)], xhat = (x[std::size_t(r * C + j)] - m) / std::sqrt(var + 1e-5);
      sum += dx, along += dx * xhat / double(C), size = std::max(size, std::fabs(dx));
    }
    INFO("row " << r << ": Σ_j dx_j = " << sum << ", (1/C) Σ_j dx_j x̂_j = " << along << ", max |dx_j| = " << size);
    CHECK(std::fabs(sum) <= 1e-5 * size * double(C));
    CHECK(std::fabs(along) <= 1e-5 * size);
  }
}

TEST_CASE("layer_norm_backward: dweight and dbias collect every row's share (R equal rows give R times one row's)",
          "[ch14]") {
  const int64_t R = 4, C = 5;
  const std::vector<float> row = row_normals(C, 11, 1.0f, 2.0f), w = row_normals(C, 12, 1.0f, 0.5f), b = row_normals(C, 13),
                           drow = row_normals(C, 14);
  std::vector<float> x, dout;
  for (int64_t r = 0; r < R; ++r) x.insert(x.end(), row.begin(), row.end()), dout.insert(dout.end(), drow.begin(), drow.end());
  const Grads one = grads_of(true, {1, C}, row, w, b, drow), all = grads_of(true, {R, C}, x, w, b, dout);
  std::vector<double> times_r_w, times_r_b;
  for (float g : one.dweight) times_r_w.push_back(double(R) * g);
  for (float g : one.dbias) times_r_b.push_back(double(R) * g);
  CHECK(relative_gap(all.dweight, times_r_w) <= 1e-6);
  CHECK(relative_gap(all.dbias, times_r_b) <= 1e-6);
}
