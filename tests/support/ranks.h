// ranks.h — runs a test body on N rank threads with a fresh threads world.
#pragma once

#include <functional>

#include "dpt/launch.h"

namespace dpt_test {

/// Runs `body` on `world` ranks (threads backend, short deadlock timeout) and
/// rethrows the first rank's error.
inline void run_ranks(int world, const std::function<void(dpt::Context&)>& body, double timeout_s = 10) {
  dpt::LaunchOptions options;
  options.ranks = world;
  options.timeout_s = timeout_s;
  dpt::launch(options, body);
}

}  // namespace dpt_test
