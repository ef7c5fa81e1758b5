/// @file link_model.h
/// @brief `LinkModel`: the alpha-beta cost of a network link, which the threads
/// backend simulates (`--link`, `--link-gbps`, `--link-latency-us`) so that a
/// laptop shows a cluster's communication costs.
///
/// A message of S bytes takes alpha + S/beta: alpha is the per-message latency,
/// beta the bandwidth. Left out: congestion inside a switch, topology (every
/// rank has one full-duplex port onto one switch), and anything under MPI,
/// where the real network is measured instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

/// The cost model of a network link: a message of S bytes takes
/// `latency_us` (alpha) plus S / bandwidth (beta) to arrive. Zero fields mean
/// "free": the default model delivers messages as fast as memcpy.
struct LinkModel {
  double latency_us = 0;  ///< alpha, microseconds per message
  double gbps = 0;        ///< beta, gigabits per second (8 Gbps = 1 GB/s); 0 = unlimited
  /// True when either field is set.
  bool enabled() const { return latency_us > 0 || gbps > 0; }
  /// Seconds `bytes` occupy a port: 8*bytes / (gbps*1e9); 0 when gbps is 0.
  double transfer_seconds(int64_t bytes) const;
  /// "25.0 GB/s (200 Gbit/s), 10 us latency" or "none".
  std::string describe() const;
};

/// A named preset: "none", "pcie", "nvlink", "ethernet", "infiniband" (numbers
/// and their sources are in link_model.cpp). Throws dpt::Error on another name.
LinkModel link_preset(const std::string& name);
/// The names link_preset() accepts.
const std::vector<std::string>& link_preset_names();

}  // namespace dpt
