// kernels.cpp — which loops run on which memory (kernels.h), and the TF32 switch.
#include "dpt/kernels.h"

#include <atomic>

#include "dpt/device.h"

namespace dpt {

namespace {
std::atomic<bool> g_tf32{false};
}  // namespace

void set_tf32(bool on) { g_tf32.store(on); }

bool tf32() { return g_tf32.load(); }

Kernels& kernels_for(const Device& device) {
  if (device.is_host_memory()) return cpu_kernels();
  return cuda_kernels(device.index());
}

}  // namespace dpt
