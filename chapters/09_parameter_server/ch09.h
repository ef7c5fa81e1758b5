/// @file ch09.h
/// @brief Chapter 09's parameter server, specified here once. Ranks
/// 0 … S−1 are **servers**: together they hold the flat parameter vector w
/// (Ψ floats), server s the contiguous shard `roles.shard(s)`, and they run
/// the optimizer (plain SGD, learning rate lr). Ranks S … N−1 are
/// **workers** w = 0 … W−1 (W = N − S): each computes a gradient on its own
/// samples at the parameters it holds, pushes it to the servers and pulls the
/// parameters back. Your holes: `apply_push` (exercises/09_parameter_server/
/// server.cpp), `push_and_pull` (worker.cpp) and `ssp_must_wait`
/// (staleness.cpp). The hints are in the chapter page (\ref ch09_hints), one
/// tier at a time; `ctest --preset student -L ch09` checks them against one
/// device computing serially, the traffic log and schedules the tests fix.
///
/// Three modes. **sync**: each step a server waits for every worker's push.
/// **async**: a server applies each push as it arrives and answers that
/// worker's pull at once, so a gradient may have been computed on parameters
/// that other pushes have changed since. **ssp** (stale-synchronous
/// parallel): async, but no worker may run more than `max_staleness` steps
/// ahead of the slowest.
///
/// Versions and staleness. A server's *version* counts the updates it has
/// applied to its shard. The *staleness* of a gradient is how many updates the
/// shard received between the moment the server sent the worker the
/// parameters that gradient was computed on and the moment the gradient is
/// applied: 0 means it was computed on the parameters it updates.
///
/// The communicator has no receive from "any source" (communicator.h), so a
/// server serves pushes in an *arrival order* fixed in advance: the order in
/// which they reach it when worker w needs a given time per step
/// (`arrival_order`). Every server serves the same order. As on a real
/// network, a sync round's pushes come in any order, not worker 0 first.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/range.h"

namespace dpt::ch09 {

// ----------------------------------------------------------------------------
// who is who (provided)

/// How the servers treat pushes and how far workers may drift apart.
enum class Mode { Sync, Async, Ssp };
/// "sync", "async" or "ssp".
const char* mode_name(Mode mode);
/// The Mode called `name`; throws dpt::Error on another name.
Mode parse_mode(const std::string& name);

/// The roles of a world of servers + workers ranks, over Ψ = `count` parameters.
struct Roles {
  int servers = 1;    ///< S: ranks 0 … S−1
  int workers = 1;    ///< W: ranks S … S+W−1
  int64_t count = 0;  ///< Ψ: parameters in all
  /// The world rank of server s.
  int server_rank(int s) const { return s; }
  /// The world rank of worker w.
  int worker_rank(int w) const { return servers + w; }
  /// Server s's shard: S contiguous near-equal ranges in server order (the
  /// first Ψ mod S one element longer).
  Range shard(int s) const;
};

/// The tag of a push (worker → server: a gradient slice).
constexpr int kPushTag = 91;
/// The tag of a pull's answer (server → worker: a parameter shard).
constexpr int kPullTag = 92;

/// One server's state. The server loop (parameter_server.cpp) receives each
/// push in the arrival order, calls apply_push, and, when apply_push returns
/// true, answers every worker whose push is waiting for an answer (and
/// keeps read_version, below, up to date as it does). (In sync it
/// also answers whoever still waits at the end of each round of W pushes, so
/// that a round that never closed is a ✘ verdict rather than a hang.)
struct ServerShard {
  Mode mode = Mode::Sync;               ///< how pushes are treated
  int workers = 1;                      ///< W
  float lr = 0.05f;                     ///< SGD's learning rate
  std::vector<float> params;            ///< this server's shard of w (roles.shard(s).size() floats)
  int64_t version = 0;                  ///< updates applied to params so far (0 at the start)
  std::vector<int64_t> read_version;    ///< per worker: the version its parameters came from
  std::vector<float> scratch;           ///< the size of params, zeros at the start: yours to use
  int tally = 0;                        ///< 0 at the start: yours to use
  std::vector<int64_t> staleness;       ///< one entry per push, in arrival order: yours to fill
};

// ----------------------------------------------------------------------------
// your holes

/// A push from worker `worker` has arrived: `grad` holds params.size() floats,
/// this shard's slice of the gradient that worker computed at the parameters
/// this server last sent it.
///
/// Returns true when it changed `params` (an update was applied), false when
/// it only held the push for later.
///
/// Postconditions:
///  - sync: pushes arrive in rounds of one per worker, in any order within a
///    round. After a round's last push, params hold exactly what one device's
///    SGD step would make of them on all W workers' samples as one batch
///    (every worker's batch has the same size); the round's other pushes
///    change neither params nor version, and return false.
///  - async and ssp: every push changes params at once, as one plain SGD step
///    on that gradient alone (so one worker is plain SGD).
///  - version counts the updates applied to params so far.
///  - staleness gains one entry per push: that gradient's staleness as
///    defined at the top of this file (in sync every entry is 0).
/// (Hole: exercises/09_parameter_server/server.cpp.)
bool apply_push(ServerShard& shard, int worker, const float* grad);

/// A worker's side of one step. `grad` (Ψ floats) is the gradient this worker
/// computed at `params` (Ψ floats).
///
/// Postconditions: every server s has received, once, the part of `grad` it
/// holds (tag kPushTag); `params` holds, shard by shard, what each server
/// sent back (tag kPullTag) after applying that push.
///
/// Communication: one push to each server and one answer from each, nothing
/// else; and no deadlock: every worker's call returns, whatever arrival order
/// the servers serve. What you may rely on: a server answers a worker only
/// after receiving that worker's push (in sync, only after the whole
/// round's); every server serves the same arrival order; a send may wait
/// until its receive is posted (communicator.h, "rendezvous").
/// (Hole: exercises/09_parameter_server/worker.cpp.)
void push_and_pull(Communicator& comm, const Roles& roles, const std::vector<float>& grad, std::vector<float>& params);

/// The stale-synchronous bound. `completed[v]` is the number of steps worker
/// v has finished (its push applied); worker `worker` wants to start its next
/// step. Returns true when it must wait.
///
/// Postcondition: no worker is ever more than `max_staleness` steps ahead of
/// the slowest worker. max_staleness = 0 is lockstep: nobody starts step k
/// (counting from 0) before every worker has finished step k − 1. Each unit
/// more lets the fastest worker run one step further ahead. A worker never
/// waits when starting would keep that bound.
/// (Hole: exercises/09_parameter_server/staleness.cpp.)
bool ssp_must_wait(const std::vector<int64_t>& completed, int worker, int max_staleness);

// ----------------------------------------------------------------------------
// the arrival order (provided; ssp calls your ssp_must_wait)

/// The order in which pushes reach the servers (worker indices, one entry per
/// push) when worker w needs `step_time[w]` per step (computing its gradient;
/// messages take no time) and the run lasts `horizon` (same unit): every push
/// finished by then. sync: one round per slowest step, each worker once, by
/// finishing time (a straggler last); equal times in an order drawn from
/// `seed`, afresh each round. async: each worker starts its next step as soon
/// as its pull is answered; pushes finishing at the same time arrive in
/// worker order. ssp: as async, but a worker that ssp_must_wait says must
/// wait starts only once it no longer must. Throws dpt::Error when every
/// worker must wait (nobody could ever move again).
std::vector<int> arrival_order(Mode mode, const std::vector<double>& step_time, double horizon,
                               int max_staleness = 0, uint64_t seed = 0);

/// The time the last push of `arrival_order(…)` finishes, in step_time's unit
/// (the run's length on that clock).
double arrival_makespan(Mode mode, const std::vector<double>& step_time, double horizon, int max_staleness = 0);

}  // namespace dpt::ch09
