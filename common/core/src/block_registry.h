// block_registry.h — which device block a pointer lies in (internal to libdpt).
//
// In the student build (CMake DPT_STUDENT=ON compiles device.cpp and
// floats.cpp with DPT_CHECK_FLOAT_RANGES=1) every Device records its live
// blocks here, and the float helpers of dpt/floats.h check each range they
// are given against the block it points into, so an offset that is wrong in
// a student's hole is a sentence naming the call, not a crash; so does the
// communicator for the buffers of send, recv and sendrecv, and a dpt::Floats
// (scratch) is a block too. Elsewhere nothing is recorded and nothing is
// checked (kCheckFloatRanges is false).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#ifndef DPT_CHECK_FLOAT_RANGES
#define DPT_CHECK_FLOAT_RANGES 0
#endif

namespace dpt {
class Device;

namespace detail {

/// Whether blocks are recorded and float ranges checked (the student build).
constexpr bool kCheckFloatRanges = DPT_CHECK_FLOAT_RANGES != 0;

/// A live block: `bytes` asked for at `begin` on `device` (null: a dpt::Floats).
struct LiveBlock {
  const char* begin = nullptr;
  std::size_t bytes = 0;
  const Device* device = nullptr;
};

/// Records / forgets a block (Device::allocate and Device::release; a
/// dpt::Floats, with no device, for its lifetime). The 64 bytes a block is
/// rounded up to must be the block's own.
void note_block(const void* begin, std::size_t bytes, const Device* device);
void forget_block(const void* begin);

/// The live block whose first `rounded` bytes hold `p` (a block is rounded up
/// to 64 bytes); false when none does (a std::vector, a stack array).
bool block_holding(const void* p, LiveBlock* out);
/// The first live block that begins inside (p, p + bytes); false when none.
bool block_starting_within(const void* p, std::size_t bytes, LiveBlock* out);

/// Student build: `count` floats from `p` lie inside the live block `p`
/// points into (a tensor's or a dpt::Floats'), else a dpt::Error naming `call`
/// and `argument`; elsewhere only count >= 0 is checked (floats.cpp).
void check_float_range(const float* p, int64_t count, const char* call, const char* argument);

}  // namespace detail
}  // namespace dpt
