// gpu.h — what every GPU test starts with.
//
//   DPT_REQUIRE_GPU();   // skips (a CTest "Skipped", with the reason) when
//                        // this dpt has no CUDA or the machine no GPU
//   DPT_REQUIRE_NCCL();  // the same, and when this dpt has no NCCL communicator
#pragma once

#include <string>

#include "dpt/gpu.h"
#include "support/catch.h"

/// Skips the test case, saying why, unless a CUDA GPU is usable here.
#define DPT_REQUIRE_GPU()                                                      \
  do {                                                                         \
    std::string dpt_gpu_reason_ = dpt::gpu::unavailable_reason();              \
    if (!dpt_gpu_reason_.empty()) DPT_SKIP("needs a CUDA GPU: " + dpt_gpu_reason_); \
  } while (0)

/// Skips the test case, saying why, unless a GPU is usable here and this dpt
/// was built with the NCCL communicator.
#define DPT_REQUIRE_NCCL()                                                     \
  do {                                                                         \
    DPT_REQUIRE_GPU();                                                         \
    if (!dpt::gpu::built_with_nccl()) DPT_SKIP("this dpt was built without the NCCL communicator"); \
  } while (0)
