// nccl_available.cpp — built with CUDA and NCCL: the NCCL communicator is in.
#include "dpt/gpu.h"

namespace dpt::gpu {
bool built_with_nccl() { return true; }
}  // namespace dpt::gpu
