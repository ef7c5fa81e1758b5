// cuda_emulator.h — CUDA's thread model on the CPU, for tests on machines
// with no GPU: include this, then a kernel header (common/backends/cuda/*.cuh), and
// the kernels compile as C++; `emulator::Launch` runs kernel<<<grid, block>>>
// with every thread of every block.
//
// How it runs a launch: the blocks one after another (blockIdx in x, then y,
// then z order); in each, blockDim.x·y·z execution contexts, one per CUDA
// thread, meet at every __syncthreads() and at the end of the block. So a
// kernel's indexing, its grid-stride loops and its shared-memory trees run as
// written. The contexts are fibers (deterministic, fast; successive rounds
// run the threads in opposite orders), or real threads under the sanitizers:
// under ThreadSanitizer a shared-memory access that a missing __syncthreads()
// leaves unordered is a reported race.
// `__shared__` arrays are function statics: one block runs at a time, so they
// are that block's.
//
// What CUDA would refuse, the emulator refuses with a sentence (an exception
// from the launch): an empty grid or block, more than 1024 threads a block, a
// grid beyond 2³¹−1 × 65535 × 65535 blocks, a launch from a kernel (dynamic
// parallelism), and threads of one block that do not all reach the same
// __syncthreads() (undefined behaviour on a GPU).
//
// Not emulated: warps (no shuffles, no warp-synchronous code), atomics,
// dynamic shared memory, streams (a launch returns when it is done), and the
// GPU's float rounding: a kernel's `a * b + c` is compiled as the C++ compiler
// compiles it. nvcc fuses it into one FMA; g++ does too in C++ (its default
// -ffp-contract=fast) where the target has FMA (the reference build's
// -march=native), not in the sanitizer builds, and not always where nvcc
// would. The tests hold the emulated kernels to the CPU kernels under the
// same rules as the GPU tests, which allow for either rounding.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

// Fibers, except under AddressSanitizer and ThreadSanitizer (stack switches
// they are not told of confuse them): threads there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DPT_EMULATOR_FIBERS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DPT_EMULATOR_FIBERS 0
#endif
#endif
#ifndef DPT_EMULATOR_FIBERS
#define DPT_EMULATOR_FIBERS 1
#endif

namespace dpt_test::emulator {

/// Whether launches run on fibers (fast: tests may use GPU-sized inputs) or
/// on threads (each barrier wakes every thread: tests keep inputs small).
inline constexpr bool kFast = DPT_EMULATOR_FIBERS;

/// CUDA's uint3 and dim3 (a dim3's missing sizes are 1).
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

/// The built-in variables, each emulated thread's own.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

/// __syncthreads() at file:line: waits for every thread of the block.
void syncthreads(const char* file, int line);

/// One launch as it was run.
struct LaunchRecord {
  dim3 grid, block;
};

/// Runs `thread` (one CUDA thread's work) as every thread of grid × block
/// and returns when all are done; throws on a launch CUDA would refuse or a
/// block whose threads met at different barriers. One launch at a time in a
/// process: a second thread's launch waits, a kernel's own launch is refused.
void run(dim3 grid, dim3 block, const std::function<void()>& thread);

/// The launches run so far in this process, in order (tests clear it).
std::vector<LaunchRecord>& launches();

/// cuda_launches.cuh's `launch` callable on the emulator.
struct Launch {
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, Args... args) const {
    run(grid, block, [&] { kernel(args...); });
  }
};

}  // namespace dpt_test::emulator

// The names CUDA code uses, for the kernel headers included after this one.
using dpt_test::emulator::blockDim;
using dpt_test::emulator::blockIdx;
using dpt_test::emulator::dim3;
using dpt_test::emulator::gridDim;
using dpt_test::emulator::threadIdx;
using dpt_test::emulator::uint3;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() ::dpt_test::emulator::syncthreads(__FILE__, __LINE__)
#define DPT_CUDA_BUILD emulated
