// machine.h — the line every benchmark prints about the machine it ran on.
#pragma once

#include <fstream>
#include <string>
#include <thread>

namespace dpt_bench {

/// "Intel(R) Xeon(R) Processor, 2 logical CPUs" from /proc/cpuinfo.
inline std::string cpu_line() {
  std::string cpu = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " logical CPUs";
}

}  // namespace dpt_bench
