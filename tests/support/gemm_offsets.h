// gemm_offsets.h — does a GEMM's answer depend on where its operands start?
//
// Chapter 07 views its layers inside one flat buffer at whatever offset the
// layer sizes give (stages 0–2) or gathers a layer into a fresh block (stage
// 3), and promises the same bits in every stage. That holds only if a device's
// gemm gives one answer per shape wherever a, b and c start: Eigen packs its
// operands, cuBLAS picks its kernel by alignment, so dpt's CUDA gemm stages an
// operand off a 256-byte boundary through an aligned copy. This runs one
// GEMM on fresh blocks and again on views 1, 2, 3 and 16 floats in (4 to 64
// bytes: every alignment class below 256 bytes), c read (beta ≠ 0) and not,
// and counts the elements whose bits differ (or a NaN where the fresh run had
// a number).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt_test {

/// Elements of c that differ in any bit between the fresh run and any
/// offset run of c = alpha·op(a)·op(b) + beta·c on `device` (m, n, k as in
/// kernels.h). 0 means "one answer wherever the operands start".
inline int64_t gemm_offset_mismatches(dpt::Device& device, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                      float beta) {
  dpt::Rng rng(uint64_t(m * 131 + n * 17 + k));
  auto values = [&](int64_t count) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (float& x : v) x = 2.0f * rng.uniform() - 1.0f;
    return v;
  };
  const std::vector<float> a = values(m * k), b = values(k * n), c0 = values(m * n);
  dpt::Kernels& kernels = dpt::kernels_for(device);
  // The three operands `offset` floats into fresh blocks; c's answer back on the host.
  auto run = [&](int64_t offset) {
    auto placed = [&](const std::vector<float>& v) {
      std::vector<float> padded(std::size_t(offset), 0.0f);
      padded.insert(padded.end(), v.begin(), v.end());
      return dpt::Tensor::from_vector({int64_t(padded.size())}, padded, device);
    };
    dpt::Tensor ta_ = placed(a), tb_ = placed(b), tc_ = placed(c0);
    kernels.gemm(ta, tb, m, n, k, 0.75f, ta_.data() + offset, tb_.data() + offset, beta, tc_.data() + offset);
    std::vector<float> all = tc_.to_vector();
    return std::vector<float>(all.begin() + offset, all.end());
  };
  const std::vector<float> fresh = run(0);
  int64_t mismatches = 0;
  for (int64_t offset : {1, 2, 3, 16}) {
    std::vector<float> moved = run(offset);
    for (std::size_t i = 0; i < fresh.size(); ++i)
      if (std::memcmp(&fresh[i], &moved[i], sizeof(float)) != 0) ++mismatches;
  }
  return mismatches;
}

}  // namespace dpt_test
