// launch_flags.cpp — the flags every chapter shares (launch.h): --ranks,
// --comm, --device, --comm-timeout, --eager-limit, --link*, --trace, each
// checked at parse time so a bad value is one line and exit code 2.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dpt/gpu.h"
#include "dpt/launch.h"
#include "dpt/options.h"

namespace dpt {

// ----------------------------------------------------------------------------
// flags

namespace {
// A finite number >= 0 (or > 0) within [lo, hi]: "inf" and "nan" are refused
// at parse time, and so are values past the bounds (launch.h says why each).
CLI::Validator finite_number(bool positive, double lo, double hi) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        char* end = nullptr;
        double value = std::strtod(v.c_str(), &end);
        bool ok = !v.empty() && *end == '\0' && std::isfinite(value) && (positive ? value > 0 : value >= 0);
        if (!ok) return std::string("expects a finite ") + (positive ? "positive" : "non-negative") +
                        " number, got '" + v + "'";
        char range[64];
        std::snprintf(range, sizeof range, "from %g to %g", lo, hi);
        if (value < lo || value > hi) return std::string("expects a number ") + range + ", got '" + v + "'";
        return "";
      },
      "NUMBER");
}

// An integer in [lo, hi], e.g. --ranks 1..4096.
CLI::Validator integer_between(int64_t lo, int64_t hi, const char* what) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long value = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno != 0 || value < lo || value > hi)
          return "expects " + std::string(what) + " from " + std::to_string(lo) + " to " +
                 std::to_string(hi) + ", got '" + v + "'";
        return "";
      },
      "INT");
}

// --device cuda where no GPU is usable: refused at parse time, saying why.
CLI::Validator usable_device() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::string reason = v == "cuda" ? gpu::unavailable_reason() : "";
        if (reason.empty()) return "";
        return "cuda needs a usable GPU, and " + reason + " (use --device cpu)";
      },
      "");
}
}  // namespace

void add_device_flag(CLI::App& app, std::string& device, const std::string& help) {
  app.add_option("--device", device, help)
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->check(usable_device())
      ->capture_default_str();
}

void add_launch_flags(CLI::App& app, LaunchOptions& o) {
  app.add_option("--ranks", o.ranks,
                 "Number of ranks (threads: at most 256, whose cost grows as ranks squared; under --comm mpi: the "
                 "mpirun -np count, at most 4096)")
      ->check(positive_integer())
      ->check(integer_between(1, kMaxRanks, "a rank count"))
      ->each([&o](const std::string&) { o.ranks_given = true; })
      ->capture_default_str();
  app.add_option("--comm", o.comm,
                 "Ranks as threads of this process, or one per process under mpirun (mpi; nccl: "
                 "one GPU each)")
      ->check(CLI::IsMember({"threads", "mpi", "nccl"}))
      ->capture_default_str();
  add_device_flag(app, o.device,
                  "Where each rank computes: cpu (a simulated device per rank) or cuda (rank r on "
                  "GPU r % GPUs; under mpirun, by local rank)");
  app.add_option("--comm-timeout", o.timeout_s,
                 "Seconds a rank may wait on a peer before it reports a deadlock")
      ->check(finite_number(true, kMinCommTimeoutS, kMaxCommTimeoutS))
      ->capture_default_str();
  app.add_option("--eager-limit", o.eager_limit_bytes,
                 "--comm threads: sends above BYTES wait for their receive, as MPI's rendezvous "
                 "protocol does (65536: Open MPI's TCP eager limit)")
      ->check(integer_between(0, int64_t(1) << 40, "a byte count"))
      ->type_name("BYTES")
      ->capture_default_str();
  app.add_option("--link", o.link_preset,
                 "Simulated network between --comm threads ranks (an alpha-beta model)")
      ->check(CLI::IsMember(link_preset_names()))
      ->capture_default_str();
  app.add_option("--link-gbps", o.link.gbps, "Simulated link bandwidth in Gbit/s (overrides --link; 0.001 to 1e6)")
      ->check(finite_number(true, kMinLinkGbps, kMaxLinkGbps));
  app.add_option("--link-latency-us", o.link.latency_us,
                 "Simulated link latency in microseconds (overrides --link; at most 1e6, one second)")
      ->check(finite_number(false, 0, kMaxLinkLatencyUs));
  add_output(app, "--trace", o.trace_path, "Write a Chrome trace timeline to FILE (ui.perfetto.dev)");
}

LinkModel effective_link(const LaunchOptions& o) {
  LinkModel link = link_preset(o.link_preset);
  if (o.link.gbps > 0) link.gbps = o.link.gbps;
  if (o.link.latency_us > 0) link.latency_us = o.link.latency_us;
  return link;
}

}  // namespace dpt
