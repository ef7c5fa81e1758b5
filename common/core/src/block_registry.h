// block_registry.h — which device block a pointer lies in (internal to libdpt).
//
// In the student build (CMake DPT_STUDENT=ON compiles device.cpp and
// floats.cpp with DPT_CHECK_FLOAT_RANGES=1) every Device records its live
// blocks here, and the float helpers of dpt/floats.h check each range they
// are given against the block it points into, so an offset that is wrong in
// a student's hole is a sentence naming the call, not a crash. Elsewhere
// nothing is recorded and nothing is checked (kCheckFloatRanges is false).
#pragma once

#include <cstddef>
#include <string>

#ifndef DPT_CHECK_FLOAT_RANGES
#define DPT_CHECK_FLOAT_RANGES 0
#endif

namespace dpt {
class Device;

namespace detail {

/// Whether blocks are recorded and float ranges checked (the student build).
constexpr bool kCheckFloatRanges = DPT_CHECK_FLOAT_RANGES != 0;

/// A live block: `bytes` asked for at `begin` on `device`.
struct LiveBlock {
  const char* begin = nullptr;
  std::size_t bytes = 0;
  const Device* device = nullptr;
};

/// Records / forgets a block (Device::allocate and Device::release).
void note_block(const void* begin, std::size_t bytes, const Device& device);
void forget_block(const void* begin);

/// The live block whose first `rounded` bytes hold `p` (a block is rounded up
/// to 64 bytes); false when none does (a std::vector, scratch, a stack array).
bool block_holding(const void* p, LiveBlock* out);
/// The first live block that begins inside (p, p + bytes); false when none.
bool block_starting_within(const void* p, std::size_t bytes, LiveBlock* out);

}  // namespace detail
}  // namespace dpt
