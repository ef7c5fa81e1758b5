// compress_fast.cpp — compress_fast.h: PowerSGD with Eigen's GEMM.
#include "compress_fast.h"

#include <Eigen/Core>
#include <cmath>
#include <random>

namespace dpt_bench {

namespace {
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<Matrix>;
using ConstMap = Eigen::Map<const Matrix>;

// Modified Gram-Schmidt on p's columns in double, as the solution does.
void orthonormalize(Matrix& p) {
  for (Eigen::Index j = 0; j < p.cols(); ++j) {
    for (Eigen::Index i = 0; i < j; ++i) {
      const double dot = p.col(i).cast<double>().dot(p.col(j).cast<double>());
      p.col(j) = (p.col(j).cast<double>() - dot * p.col(i).cast<double>()).cast<float>();
    }
    const double norm = p.col(j).cast<double>().norm();
    if (norm > 0) p.col(j) = (p.col(j).cast<double>() / norm).cast<float>();
    else p.col(j).setZero();
  }
}

class FastPowerSgd : public dpt::ch10::Compressor {
 public:
  FastPowerSgd(int64_t rank, const std::vector<dpt::Shape>& shapes, uint64_t seed) : rank_(rank), shapes_(shapes) {
    std::mt19937_64 generator(seed);  // the draws of compressor.cpp's PowerSgd, in the same order
    std::normal_distribution<float> normal;
    for (const dpt::Shape& s : shapes_)
      if (s.size() == 2) {
        Matrix q(s[1], rank_);
        for (Eigen::Index i = 0; i < q.size(); ++i) q.data()[i] = normal(generator);
        qs_.push_back(q);
      }
  }
  void reduce(dpt::Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    std::vector<float> vectors;
    std::size_t matrix = 0;
    int64_t at = 0;
    for (const dpt::Shape& s : shapes_) {
      const int64_t size = dpt::shape_numel(s);
      if (s.size() == 2) {
        Map m(x.data() + at, s[0], s[1]);  // M_r (rows, cols), overwritten by P Qᵀ below
        Matrix& q = qs_[matrix++];
        Matrix p = m * q;                                       // P_r = M_r Q  (rows, R)
        comm.all_reduce(p.data(), p.size(), dpt::ReduceOp::Avg);
        orthonormalize(p);
        q.noalias() = m.transpose() * p;                        // Q_r = M_rᵀ P  (cols, R)
        comm.all_reduce(q.data(), q.size(), dpt::ReduceOp::Avg);
        m.noalias() = p * q.transpose();                        // P Qᵀ
      } else {
        vectors.insert(vectors.end(), x.begin() + at, x.begin() + at + size);
      }
      at += size;
    }
    if (!vectors.empty()) comm.all_reduce(vectors.data(), int64_t(vectors.size()), dpt::ReduceOp::Avg);
    delivered = x;
    at = 0;
    std::size_t v = 0;
    for (const dpt::Shape& s : shapes_) {
      const int64_t size = dpt::shape_numel(s);
      if (s.size() != 2)
        for (int64_t i = 0; i < size; ++i) x[std::size_t(at + i)] = vectors[v++];
      at += size;
    }
  }
  std::string name() const override { return "powersgd:" + std::to_string(rank_) + " (bench's fast variant)"; }

 private:
  int64_t rank_;
  std::vector<dpt::Shape> shapes_;
  std::vector<Matrix> qs_;
};
}  // namespace

std::unique_ptr<dpt::ch10::Compressor> make_fast_powersgd(int64_t rank, const std::vector<dpt::Shape>& shapes, uint64_t seed) {
  return std::make_unique<FastPowerSgd>(rank, shapes, seed);
}

}  // namespace dpt_bench
