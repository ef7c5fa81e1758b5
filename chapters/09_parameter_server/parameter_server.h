// parameter_server.h — running the parameter server: the server loop, the
// worker loop and the bookkeeping around them (traffic, time, the final
// parameters, the step check's records). Provided, not a hole: it calls your
// apply_push and push_and_pull (ch09.h) and reads nothing else of yours.
#pragma once

#include <functional>
#include <vector>

#include "ch09.h"
#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/options.h"

namespace dpt {
class StepRecorder;
}

namespace dpt::ch09 {

/// One run's settings (the same on every rank).
struct PsConfig {
  Mode mode = Mode::Sync;  ///< sync, async or ssp
  int servers = 1;         ///< S; the other ranks are workers
  std::vector<int> order;  ///< the arrival order: worker indices, one per push (arrival_order)
  int slow_worker = -1;    ///< this worker sleeps (slowdown − 1) × its compute time each step; -1: none
  double slowdown = 1;     ///< X
  bool keep_pulled = false;  ///< the first worker keeps its parameters before step 0 and after every pull
  /// Called on every worker before each push (worker index, its step): a test's hook.
  std::function<void(int worker, int64_t step)> before_push;
  /// Called on every server before it applies a push (server index, the
  /// push's place in the arrival order): a test's hook.
  std::function<void(int server, int64_t push)> before_apply;
};

/// Runs a push, a pull or push_and_pull of `worker` (`message`): a length its
/// partner did not expect becomes an error that says what each server
/// expects; a peer's failure, a timeout or a hole not filled yet passes
/// through as it is.
void exchange(const Roles& roles, int worker, const std::function<void()>& message);

/// Throws dpt::Error, naming --servers, unless `roles` has a server and a
/// worker and no more servers than parameters.
void check_roles(const Roles& roles);

/// A PsConfig of these fields (the others at their defaults).
PsConfig ps_config(Mode mode, int servers, std::vector<int> order, int slow_worker = -1, double slowdown = 1);

/// What one rank saw of a run.
struct PsRun {
  Roles roles;             ///< who is who in this run
  bool is_server = false;  ///< this rank is a server (else a worker)
  std::vector<int64_t> staleness;  ///< a server: its per-push staleness entries (apply_push's)
  std::vector<bool> applied;       ///< a server: per push, whether apply_push returned true (an update)
  int64_t version = 0;             ///< a server: its version at the end
  std::vector<float> params;       ///< rank 0: the servers' final parameters, all Ψ of them
  std::vector<std::vector<float>> pulled;  ///< first worker with keep_pulled: w before step 0, after each pull
  std::vector<double> losses;      ///< a worker: its loss at each of its steps
  int64_t steps = 0;               ///< a worker: steps it took
  TrafficLog traffic;              ///< every rank's sends during the protocol (gathered; excludes the final gather)
  double seconds = 0;              ///< wall time of the protocol, slowest rank
};

/// Collective: runs the parameter server on every rank of ctx (servers =
/// c.servers, workers = the rest) for the pushes of c.order. The servers
/// start from the model the flags ask for (--seed, --model) and run plain SGD
/// with --lr; worker w's k-th step trains on its strided shard of global batch
/// k (W · --batch samples, drawn as every chapter draws them), so sync is
/// comparable with one device on that batch. `recorder` (sync, the first
/// worker) records each step's weights and the gradient it applied,
/// (w_k − w_k+1)/lr, for the step check (dpt/step_check.h).
PsRun run_parameter_server(Context& ctx, const Options& o, const Dataset& data, const PsConfig& c,
                           StepRecorder* recorder = nullptr);

}  // namespace dpt::ch09
