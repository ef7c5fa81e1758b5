// kernels.cpp — which loops run on which memory (kernels.h).
#include "dpt/kernels.h"

#include "dpt/device.h"

namespace dpt {

Kernels& kernels_for(const Device& device) {
  if (device.is_host_memory()) return cpu_kernels();
  return cuda_kernels(device.index());
}

}  // namespace dpt
