// ranks.h — runs a test body on N rank threads with a fresh threads world.
#pragma once

#include <functional>

#include "dpt/launch.h"

namespace dpt_test {

/// Runs `body` on `world` ranks (threads backend, short deadlock timeout) and
/// rethrows the first rank's error. Eager limit 0: every send waits until its
/// receive is posted (rendezvous). The MPI standard lets any send block that
/// way, so code that passes here has no send order that only buffering saves
/// (a ring of send-then-recv deadlocks here at any message size, and the
/// timeout names the ranks).
inline void run_ranks(int world, const std::function<void(dpt::Context&)>& body, double timeout_s = 10) {
  dpt::LaunchOptions options;
  options.ranks = world;
  options.timeout_s = timeout_s;
  options.eager_limit_bytes = 0;
  dpt::launch(options, body);
}

}  // namespace dpt_test
