// threads_world.h — launch options for a threads world of `ranks` rank
// threads with a communicator timeout, for the threads communicator's tests.
#pragma once

#include "dpt/launch.h"

namespace dpt_test {

/// `ranks` rank threads, a communicator timeout of `timeout_s` seconds.
inline dpt::LaunchOptions threads(int ranks, double timeout_s = 10) {
  dpt::LaunchOptions o;
  o.ranks = ranks;
  o.timeout_s = timeout_s;
  return o;
}

}  // namespace dpt_test
