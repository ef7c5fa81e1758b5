// link_model.cpp — the alpha-beta link model and its named presets. The
// threads backend's clock that applies it is threads/link_clock.cpp.
#include "dpt/comm/link_model.h"

#include <cstdio>

#include "dpt/check.h"

namespace dpt {

double LinkModel::transfer_seconds(int64_t bytes) const {
  return gbps > 0 ? 8.0 * double(bytes) / (gbps * 1e9) : 0.0;
}

std::string LinkModel::describe() const {
  if (!enabled()) return "none";
  char text[128];
  if (gbps > 0) {
    std::snprintf(text, sizeof text, "%.3g GB/s (%g Gbit/s), %g us latency", gbps / 8, gbps,
                  latency_us);
  } else {
    std::snprintf(text, sizeof text, "unlimited bandwidth, %g us latency", latency_us);
  }
  return text;
}

// Round numbers for one direction of one link, close to what benchmarks see
// (not the marketing peak):
//   pcie       PCIe 4.0 x16: 31.5 GB/s raw per direction, ~25 GB/s in
//              cudaMemcpy benchmarks; ~10 us for a small host<->device copy.
//   nvlink     NVLink 3 (A100 SXM): 12 links x 25 GB/s = 300 GB/s per
//              direction; a few us per message in NCCL's small-message tests.
//   ethernet   10 GbE with TCP: 10 Gbit/s; ~50 us one-way through the kernel
//              network stack and a switch.
//   infiniband HDR (ConnectX-6): 200 Gbit/s; ~2 us MPI ping-pong latency.
LinkModel link_preset(const std::string& name) {
  if (name == "none" || name.empty()) return {};
  if (name == "pcie") return {10.0, 200.0};
  if (name == "nvlink") return {3.0, 2400.0};
  if (name == "ethernet") return {50.0, 10.0};
  if (name == "infiniband") return {2.0, 200.0};
  DPT_FAIL("unknown link '" << name << "': expected none, pcie, nvlink, ethernet or infiniband");
}

const std::vector<std::string>& link_preset_names() {
  static const std::vector<std::string> names = {"none", "pcie", "nvlink", "ethernet",
                                                 "infiniband"};
  return names;
}

}  // namespace dpt
