// emulated_kernels.h — the GPU's Kernels with no GPU: the Kernels calls the
// GPU runs (LaunchedKernels, common/backends/cuda/cuda_launches.cuh) and their CUDA
// kernels (cuda_elementwise.cuh, cuda_reductions.cuh), every thread run on
// the CPU by the emulator (support/cuda_emulator.h), over host memory.
//
// So the kernel specs (support/kernel_checks.h) run against the GPU's own
// kernel code on every machine, under the sanitizers too: indexing, grid-
// stride loops, the two passes of a reduction, shared-memory trees. What only
// a GPU shows (streams, CUDA graphs, cuBLAS, FMA rounding) stays with the
// `gpu` tests. gemm is cuBLAS on a GPU, so here it refuses with a sentence.
#pragma once

#include "dpt/kernels.h"

namespace dpt_test {

/// The one emulated Kernels (stateless but for its scratch: one caller at a time).
dpt::Kernels& emulated_cuda_kernels();

}  // namespace dpt_test
