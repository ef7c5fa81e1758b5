// kink_allowance.cpp — the bound of dpt/kink_allowance.h, in double with Eigen.
#include "dpt/kink_allowance.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "dpt/check.h"

namespace dpt {

namespace {
using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Row = Eigen::Matrix<double, 1, Eigen::Dynamic>;

Matrix as_matrix(const Tensor& t, int64_t rows, int64_t cols) {
  std::vector<float> values = t.to_vector();
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(values.data(), rows, cols)
      .cast<double>();
}

// Higham's γ_K: |fl(Σ_K x_i y_i) − Σ x_i y_i| ≤ γ_K Σ |x_i y_i| in any order, u = 2⁻²⁴.
double gamma(int64_t terms) {
  const double k_u = double(terms) * std::ldexp(1.0, -24);
  return k_u / (1.0 - k_u);
}

// One layer as the bound sees it (shapes for a batch of B).
struct Layer {
  Matrix w;            // (out, in)
  Row b;               // (1, out)
  Matrix input;        // a_{l−1} (B, in), exact up to double rounding
  Matrix z;            // (B, out)
  Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic> kink;  // (B, out): |z| within rounding of 0
};
}  // namespace

KinkAllowance kink_allowance(const MLP& model, const Batch& batch) {
  const auto& linears = model.layers();
  const int64_t B = batch.x.size(0), L = int64_t(linears.size());
  DPT_CHECK(int64_t(batch.y.size()) == B, "kink_allowance: " << batch.y.size() << " labels for " << B << " rows");
  KinkAllowance none;  // the bound follows Linear → ReLU only: with batch norm it allows nothing
  if (!model.norms().empty()) {
    none.bound.assign(std::size_t(model.num_parameters()), 0.0f);
    return none;
  }
  std::vector<Layer> layers(linears.size());
  Matrix a = as_matrix(batch.x, B, batch.x.size(1));
  Matrix error;  // bound on |a_run − a_exact| of the layer's input
  KinkAllowance out;
  // ---- forward: z, and which units two summation orders may disagree on
  for (int64_t l = 0; l < L; ++l) {
    Layer& layer = layers[l];
    const Tensor& w = linears[l].weight;
    layer.w = as_matrix(w, w.size(0), w.size(1));
    layer.b = as_matrix(linears[l].bias, 1, w.size(0));
    layer.input = a;
    layer.z = (a * layer.w.transpose()).rowwise() + layer.b;
    if (l + 1 == L) break;  // logits: no ReLU
    const Matrix magnitude = (a.cwiseAbs() * layer.w.cwiseAbs().transpose()).rowwise() + layer.b.cwiseAbs();
    const Matrix carried = l == 0 ? Matrix::Zero(B, magnitude.cols())  // the inputs are exact
                                  : Matrix(error * layer.w.cwiseAbs().transpose());
    error = gamma(w.size(1) + 1) * magnitude + carried;
    layer.kink = layer.z.cwiseAbs().array() <= error.array();
    a = layer.z.cwiseMax(0.0);  // ReLU is 1-Lipschitz: |Δa| ≤ |Δz| = error
  }
  // ---- backward: dz of the mean cross-entropy, and D ≥ |dz_run1 − dz_run2|
  Matrix dz = layers.back().z;
  for (int64_t i = 0; i < B; ++i) {
    Row row = dz.row(i);
    const double shift = row.maxCoeff();
    row = (row.array() - shift).exp().matrix();
    row /= row.sum();
    row(batch.y[i]) -= 1.0;
    dz.row(i) = row / double(B);
  }
  Matrix D = Matrix::Zero(B, dz.cols());
  std::vector<std::vector<float>> per_layer(2 * linears.size());
  for (int64_t l = L - 1; l >= 0; --l) {
    const Layer& layer = layers[l];
    const Matrix dw = D.transpose() * layer.input.cwiseAbs();  // (out, in)
    const Row db = D.colwise().sum();
    per_layer[2 * l].assign(dw.data(), dw.data() + dw.size());
    per_layer[2 * l + 1].assign(db.data(), db.data() + db.size());
    if (l == 0) break;
    const Layer& below = layers[l - 1];
    const Matrix da = dz * layer.w;                  // (B, in) = gradient at a_{l−1}
    const Matrix carried = D * layer.w.cwiseAbs();   // its bound
    const auto passes = (below.z.array() > 0.0).cast<double>();
    dz = (da.array() * passes).matrix();
    D = below.kink.select(da.cwiseAbs().array() + carried.array(), passes * carried.array()).matrix();
  }
  for (auto& part : per_layer) out.bound.insert(out.bound.end(), part.begin(), part.end());
  std::vector<bool> sample_has_kink(std::size_t(B), false);
  for (int64_t l = 0; l + 1 < L; ++l)
    for (int64_t i = 0; i < B; ++i) {
      const int64_t n = layers[l].kink.row(i).count();
      out.units += n;
      if (n > 0) sample_has_kink[std::size_t(i)] = true;
    }
  for (bool k : sample_has_kink) out.samples += k ? 1 : 0;
  return out;
}

}  // namespace dpt
