// emulated_side.h — the CUDA emulator as one side of a kernel spec
// (support/kernel_checks.h): the GPU's own kernels on CPU threads, their
// memory on cpu:1, medium sizes where the emulator runs on fibers, small ones
// where each GPU thread is an OS thread.
#pragma once

#include "dpt/device.h"
#include "support/cuda_emulator.h"
#include "support/emulated_kernels.h"
#include "support/kernel_checks.h"

namespace dpt_test {

/// The emulated GPU for a kernel spec.
inline kernel_checks::Side emulated_side() {
  return {emulated_cuda_kernels(), dpt::Device::cpu(1),
          emulator::kFast ? kernel_checks::Sizes::medium : kernel_checks::Sizes::small};
}

}  // namespace dpt_test
