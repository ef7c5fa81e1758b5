// ch09_world.h — what chapter 09's tests share: a small problem's options
// (Ψ = 596), the parameter server run on a threads world (a deadlock or a
// push of the wrong slice fails saying why), and sync arrival orders (in
// worker order, and shuffled round by round).
#pragma once

#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ch09.h"
#include "dpt/data_parallel.h"
#include "dpt/options.h"
#include "parameter_server.h"
#include "slice_check.h"
#include "support/ranks.h"

namespace dpt_test {

/// --model 32-16-4 on 256 samples, batch 8, `steps` steps (Ψ = 596).
inline dpt::Options small_options(int64_t steps, float lr = 0.1f) {
  dpt::Options o;
  CLI::App app;
  dpt::add_common_flags(app, o);
  app.parse(std::string("--quiet --model 32-16-4 --samples 256 --batch 8 --steps ") + std::to_string(steps));
  o.lr = lr;
  return o;
}

/// What every rank of a parameter-server run returned.
struct World {
  std::vector<dpt::ch09::PsRun> ranks;  // each rank's view
};

// Runs the parameter server on servers + workers rank threads (rendezvous
// sends: any order that only buffering saves deadlocks here).
inline World run_ps(int servers, int workers, dpt::ch09::PsConfig c, const dpt::Options& o,
                    double timeout_s = 5) {
  World out;
  out.ranks.resize(std::size_t(servers + workers));
  dpt::Dataset data = dpt::load_dataset(o);
  std::mutex mutex;
  c.servers = servers;
  try {
    dpt_test::run_ranks(servers + workers, [&](dpt::Context& ctx) {
      dpt::ch09::PsRun run = dpt::ch09::run_parameter_server(ctx, o, data, c);
      std::lock_guard<std::mutex> lock(mutex);
      out.ranks[std::size_t(ctx.rank)] = std::move(run);
    }, timeout_s);
  } catch (const dpt::Timeout& e) {
    FAIL(servers << " server(s), " << workers << " worker(s), " << dpt::ch09::mode_name(c.mode) << ": the ranks deadlocked. A "
         "server answers a worker only after that worker's push has arrived (in sync, after the whole round's), and "
         "serves workers in its own order: a worker that waits for a server's answer before it has pushed to that "
         "server waits forever. The timeout said: " << e.what());
  } catch (const dpt::NotImplemented&) {
    throw;
  } catch (const dpt::Error& e) {
    if (std::string(e.what()).find("(tag 91)") == std::string::npos) throw;  // not a push
    FAIL(servers << " server(s), " << workers << " worker(s): a push did not match what its server receives "
         "(the run says what each server expects): " << e.what());
  }
  return out;
}

/// Sync arrival order: `steps` rounds of workers 0, 1, …, workers-1.
inline std::vector<int> rounds(int workers, int steps) {
  std::vector<int> order;
  for (int k = 0; k < steps; ++k)
    for (int w = 0; w < workers; ++w) order.push_back(w);
  return order;
}

/// Sync arrival order: `steps` rounds, each every worker once, shuffled
/// afresh each round (a fixed generator, the same on every machine); the
/// first round never ends with worker W−1, as pushes on a network may not.
inline std::vector<int> shuffled_rounds(int workers, int steps) {
  std::vector<int> order;
  uint32_t state = 20261127u;
  for (int k = 0; k < steps; ++k) {
    std::vector<int> round;
    for (int w = 0; w < workers; ++w) round.push_back(w);
    for (int i = workers - 1; i > 0; --i) {
      state = state * 1664525u + 1013904223u;
      std::swap(round[std::size_t(i)], round[std::size_t((state >> 8) % uint32_t(i + 1))]);
    }
    if (k == 0 && round.back() == workers - 1) std::swap(round.front(), round.back());
    order.insert(order.end(), round.begin(), round.end());
  }
  return order;
}

/// Fails the calling test naming push_and_pull when it sends a server another
/// slice than its own, or puts an answer anywhere but its shard's place (the
/// program's slice check: 2 servers, 3 workers, values naming their element).
/// apply_push's tests get every gradient through it, and would otherwise
/// report its fault as theirs.
inline void require_push_and_pull() {
  std::string problem;
  dpt_test::run_ranks(5, [&](dpt::Context& ctx) {
    std::string seen = dpt::ch09::check_slices(ctx, 601, 2);
    if (ctx.is_root()) problem = seen;
  }, 5);
  if (!problem.empty())
    FAIL("push_and_pull (exercises/09_parameter_server/worker.cpp) is wrong: " << problem << ". This test "
         "gets every gradient through it: its own tests (\"push_and_pull: …\") say which property fails");
}

}  // namespace dpt_test
