// none/nccl_available.cpp — built with CUDA but without NCCL.
#include "dpt/gpu.h"

namespace dpt::gpu {
bool built_with_nccl() { return false; }
}  // namespace dpt::gpu
