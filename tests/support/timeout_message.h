// timeout_message.h — reads the deadlock report of a communicator timeout.
#pragma once

#include <cstdio>
#include <string>

namespace dpt_test {

/// Finds "rank W waited 0.5 s in recv from rank L (tag 0, 1 float" in a
/// timeout message; sets W and L and returns true when found.
inline bool parse_wait(const std::string& message, int* waiting, int* on) {
  for (std::size_t at = message.find("rank "); at != std::string::npos; at = message.find("rank ", at + 1)) {
    char tail[32] = {0};
    if (std::sscanf(message.c_str() + at, "rank %d waited 0.5 s in recv from rank %d (tag 0, 1 flo%3s", waiting, on,
                    tail) == 3)
      return true;
  }
  return false;
}

}  // namespace dpt_test
