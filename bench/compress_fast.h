// compress_fast.h — the fast variant of chapter 10's PowerSGD hole, for
// bench_compress only (DESIGN: the solution is the plainest correct code; the
// fast variant lives in bench/). Labelled as such wherever it prints.
//
// It is `powersgd:R` of compressor.h with each round's three products done
// by Eigen's GEMM (a blocked, vectorized kernel) instead of the hole's
// triple loops: the same messages (P then Q per matrix, the vectors in one
// all_reduce), the same warm start, and the same Gram-Schmidt in double, so
// it differs from the hole only by the products' summation order.
//
// Left out: the other holes (top-k's decode and error feedback already run
// at memory speed as the solution writes them).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "compressor.h"

namespace dpt_bench {

/// powersgd:`rank` for a model of `shapes`, Q drawn as make_compressor draws it from `seed`.
std::unique_ptr<dpt::ch10::Compressor> make_fast_powersgd(int64_t rank, const std::vector<dpt::Shape>& shapes, uint64_t seed);

}  // namespace dpt_bench
