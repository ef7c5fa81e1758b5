// parameter_server.cpp — the server loop and the worker loop (spec:
// parameter_server.h). Messages: the servers answer every worker's first pull
// with the starting shard; then a worker pushes (kPushTag) and pulls
// (kPullTag) once per step through your push_and_pull, while each server
// receives pushes in the arrival order, hands each one to your apply_push and,
// when it applied an update, answers every worker whose push it holds.
#include "parameter_server.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/report.h"
#include "dpt/step_check.h"
#include "dpt/timing.h"

namespace dpt::ch09 {

namespace {
constexpr int kFinalTag = 93;

// A push or pull whose length its partner did not expect: the communicator
// names world ranks, a tag and counts; this says what each server expects.
[[noreturn]] void protocol_broken(const Roles& roles, int worker, const Error& e) {
  std::string shards;
  for (int s = 0; s < roles.servers; ++s)
    shards += (s ? ", server " : "server ") + std::to_string(s) + " (rank " + std::to_string(roles.server_rank(s)) +
              ") " + std::to_string(roles.shard(s).size()) + " floats";
  DPT_FAIL("worker " << worker << " (rank " << roles.worker_rank(worker) << ") and a server disagree on a message's "
           "length: server s receives exactly its shard's slice of the gradient (roles.shard(s); tag kPushTag = "
           << kPushTag << "), once per step, and answers with its shard, the same length (kPullTag = " << kPullTag
           << "). Here: " << shards << ". The communicator said: " << e.what());
}

}  // namespace

void exchange(const Roles& roles, int worker, const std::function<void()>& message) {
  try {
    message();
  } catch (const PeerFailed&) {
    throw;
  } catch (const Timeout&) {
    throw;
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    protocol_broken(roles, worker, e);
  }
}

namespace {
// ----------------------------------------------------------------------------
// a server: receive pushes in the arrival order, apply, answer

void serve(Context& ctx, const Options& o, const PsConfig& c, PsRun& out) {
  const Roles& roles = out.roles;
  const int s = ctx.rank;
  const Range mine = roles.shard(s);
  ServerShard shard;
  shard.mode = c.mode;
  shard.workers = roles.workers;
  shard.lr = o.lr;
  std::vector<float> w = flatten(build_model(o, Device::host()).parameters());  // the model the flags ask for
  shard.params.assign(w.begin() + mine.begin, w.begin() + mine.end);
  shard.scratch.assign(shard.params.size(), 0.0f);
  shard.read_version.assign(std::size_t(roles.workers), 0);
  for (int v = 0; v < roles.workers; ++v)  // every worker's first pull: the start
    ctx.comm.send(shard.params.data(), mine.size(), roles.worker_rank(v), kPullTag);
  std::vector<float> grad(shard.params.size());
  std::vector<int> waiting;  // workers whose push is held, in arrival order
  for (std::size_t i = 0; i < c.order.size(); ++i) {
    const int v = c.order[i];
    exchange(roles, v, [&] { ctx.comm.recv(grad.data(), mine.size(), roles.worker_rank(v), kPushTag); });
    if (c.before_apply) c.before_apply(s, int64_t(i));
    waiting.push_back(v);
    const bool applied = apply_push(shard, v, grad.data());
    out.applied.push_back(applied);
    // Sync: whoever still waits at a round's end is answered too, so that a
    // round apply_push never closed is judged (round_closes_text), not a hang.
    const bool round_end = c.mode == Mode::Sync && (i + 1) % std::size_t(roles.workers) == 0;
    if (!applied && !round_end) continue;
    for (int answered : waiting) {  // their pulls: the shard as it is now
      shard.read_version[std::size_t(answered)] = shard.version;
      exchange(roles, answered,
               [&] { ctx.comm.send(shard.params.data(), mine.size(), roles.worker_rank(answered), kPullTag); });
    }
    waiting.clear();
  }
  DPT_CHECK(waiting.empty(), "server " << s << " ended holding " << waiting.size() << " push(es) it never applied ("
                                       << mode_name(c.mode) << " mode): their workers wait for an answer forever");
  out.staleness = shard.staleness;
  out.version = shard.version;
  out.params = shard.params;  // this shard for now; rank 0 gathers them all at the end
}

// ----------------------------------------------------------------------------
// a worker: pull the start, then compute, push, pull

void work(Context& ctx, const Options& o, const Dataset& data, const PsConfig& c, StepRecorder* recorder,
          PsRun& out) {
  const Roles& roles = out.roles;
  const int me = ctx.rank - roles.servers;
  MLP model = build_model(o, ctx.device);  // its weights are replaced by the pulled ones every step
  std::vector<Tensor> params = model.parameters();
  std::vector<float> w(std::size_t(roles.count));
  for (int s = 0; s < roles.servers; ++s) {
    Range r = roles.shard(s);
    ctx.comm.recv(w.data() + r.begin, r.size(), roles.server_rank(s), kPullTag);
  }
  const bool first = me == 0;
  if (first && c.keep_pulled) out.pulled.push_back(w);
  const int64_t steps = std::count(c.order.begin(), c.order.end(), me);
  BatchSampler sampler(data.size(), o.batch * roles.workers, !o.no_shuffle, o.seed);
  for (int64_t k = 0; k < steps; ++k) {
    auto started = std::chrono::steady_clock::now();
    unflatten(w, params);
    for (Tensor& p : params) p.zero_grad();
    Batch batch = gather_batch(data, strided_shard(sampler.indices(k), me, roles.workers), ctx.device);
    Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);
    loss.backward();
    std::vector<Tensor> grads;
    for (Tensor& p : params) grads.push_back(p.grad());
    std::vector<float> grad = flatten(grads);
    out.losses.push_back(loss.item());
    if (me == c.slow_worker && c.slowdown > 1)  // the straggler: X times the compute time in all
      std::this_thread::sleep_for(std::chrono::duration<double>((c.slowdown - 1) * seconds_since(started)));
    if (c.before_push) c.before_push(me, k);
    const bool keep = first && recorder && recorder->keeps(k, steps, roles.count);
    std::vector<float> before = keep ? w : std::vector<float>();
    exchange(roles, me, [&] { push_and_pull(ctx.comm, roles, grad, w); });
    if (keep) {  // the gradient the servers applied, read back from the step they took
      std::vector<float> applied(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) applied[i] = (before[i] - w[i]) / o.lr;
      recorder->record(k, steps, before.data(), applied.data(), roles.count);
    }
    if (first && c.keep_pulled) out.pulled.push_back(w);
  }
  out.steps = steps;
  unflatten(w, params);
}

// Rank 0 (server 0) collects every server's final shard.
void gather_final(Context& ctx, PsRun& out) {
  const Roles& roles = out.roles;
  if (ctx.rank >= roles.servers) return;
  if (ctx.rank != 0) {
    ctx.comm.send(out.params.data(), int64_t(out.params.size()), 0, kFinalTag);
    return;
  }
  std::vector<float> all(std::size_t(roles.count));
  std::copy(out.params.begin(), out.params.end(), all.begin());
  for (int s = 1; s < roles.servers; ++s) {
    Range r = roles.shard(s);
    ctx.comm.recv(all.data() + r.begin, r.size(), roles.server_rank(s), kFinalTag);
  }
  out.params = all;
}
}  // namespace

// ----------------------------------------------------------------------------

PsRun run_parameter_server(Context& ctx, const Options& o, const Dataset& data, const PsConfig& c,
                           StepRecorder* recorder) {
  PsRun out;
  out.roles.servers = c.servers;
  out.roles.workers = ctx.world - c.servers;
  out.roles.count = build_model(o, Device::host()).num_parameters();
  check_roles(out.roles);
  for (int v : c.order)
    DPT_CHECK(v >= 0 && v < out.roles.workers, "arrival order names worker " << v << " of " << out.roles.workers);
  if (c.mode == Mode::Sync) {  // rounds: each block of W pushes has every worker once
    const std::size_t W = std::size_t(out.roles.workers);
    DPT_CHECK(c.order.size() % W == 0, "a sync arrival order is rounds of " << W << " pushes; this one has "
                                                                            << c.order.size());
    for (std::size_t r = 0; r < c.order.size(); r += W) {
      std::vector<int> round(c.order.begin() + std::ptrdiff_t(r), c.order.begin() + std::ptrdiff_t(r + W));
      std::sort(round.begin(), round.end());
      for (std::size_t w = 0; w < W; ++w)
        DPT_CHECK(round[w] == int(w), "sync round " << r / W << " of the arrival order does not have every worker "
                                                       "once");
    }
  }
  out.is_server = ctx.rank < c.servers;
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  auto started = std::chrono::steady_clock::now();
  if (out.is_server)
    serve(ctx, o, c, out);
  else
    work(ctx, o, data, c, recorder, out);
  out.seconds = max_over_ranks(ctx.comm, seconds_since(started));
  out.traffic = ctx.comm.gather_traffic();
  gather_final(ctx, out);
  return out;
}

void check_roles(const Roles& roles) {
  DPT_CHECK(roles.servers >= 1 && roles.workers >= 1, "--servers " << roles.servers << " with "
            << roles.servers + roles.workers << " ranks: need at least one server and one worker");
  DPT_CHECK(roles.count >= roles.servers, "--servers " << roles.servers << " is more than the " << roles.count
                                                        << " parameters to shard");
}

PsConfig ps_config(Mode mode, int servers, std::vector<int> order, int slow_worker, double slowdown) {
  PsConfig c;
  c.mode = mode;
  c.servers = servers;
  c.order = std::move(order);
  c.slow_worker = slow_worker;
  c.slowdown = slowdown;
  return c;
}

}  // namespace dpt::ch09
