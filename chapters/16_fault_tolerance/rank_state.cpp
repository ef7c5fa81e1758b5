// rank_state.cpp — a rank's state as flat vectors, and its checksum
// (elastic_rank_parts.h).
#include <cstring>

#include "dpt/options.h"
#include "elastic_rank_parts.h"

namespace dpt::ch16::parts {

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

RankState fresh_state(const Options& o, Device& device) {
  RankState st{build_model(o, device), {}, {}, 0, 0};
  st.params = st.model.parameters();
  st.momentum.assign(std::size_t(st.model.num_parameters()), 0.0f);
  return st;
}

std::vector<float> flat_parameters(const RankState& st) {
  std::vector<float> flat;
  for (const Tensor& p : st.params) {
    std::vector<float> v = p.to_vector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

void set_flat_parameters(RankState& st, const std::vector<float>& flat) {
  std::size_t at = 0;
  for (Tensor& p : st.params) {
    Tensor host = Tensor::zeros(p.shape(), Device::host());
    std::memcpy(host.data(), flat.data() + at, std::size_t(p.numel()) * sizeof(float));
    p.copy_from(host);
    at += std::size_t(p.numel());
  }
}

// FNV-1a over the parameters' bytes: equal replicas, equal sums.
uint64_t checksum_of(const std::vector<float>& flat) {
  uint64_t h = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(flat.data());
  for (std::size_t i = 0; i < flat.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  return h;
}

}  // namespace dpt::ch16::parts
