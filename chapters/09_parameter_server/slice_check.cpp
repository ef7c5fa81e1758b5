// slice_check.cpp — the slice check (spec: slice_check.h). Values name their
// element, so a slice from the wrong offset cannot pass for the right one
// (exact in a float up to Ψ = 2^24; beyond, near offsets may alias).
#include "slice_check.h"

#include <algorithm>
#include <cmath>

#include "dpt/report.h"
#include "parameter_server.h"

namespace dpt::ch09 {

namespace {
constexpr int kFields = 4;  // per rank: what, then three numbers (see check_slices)

// "the gradient's element 17" for a value that names one, else the value.
std::string named(float value, int64_t count, bool answer) {
  const double v = answer ? -double(value) : double(value);
  if (v >= 1 && v <= double(count) && v == std::floor(v))
    return (answer ? "the answer for element " : "the gradient's element ") + std::to_string(int64_t(v) - 1);
  return "the value " + fmt(double(value));
}
}  // namespace

int slice_check_servers(int servers, int world) { return world >= 3 ? std::max(servers, 2) : servers; }

std::string check_slices(Context& ctx, int64_t count, int servers) {
  const Roles roles{servers, ctx.world - servers, count};
  check_roles(roles);  // before any hole is called
  std::vector<float> found(std::size_t(ctx.world * kFields), 0.0f);  // this rank's first mismatch, summed to all
  float* mine = found.data() + ctx.rank * kFields;
  if (ctx.rank < servers) {  // a server: receive every push, then answer each
    const Range r = roles.shard(ctx.rank);
    std::vector<float> got(std::size_t(r.size())), answer(std::size_t(r.size()));
    for (int64_t i = 0; i < r.size(); ++i) answer[std::size_t(i)] = -float(r.begin + i + 1);
    for (int w = 0; w < roles.workers; ++w) {
      exchange(roles, w, [&] { ctx.comm.recv(got.data(), r.size(), roles.worker_rank(w), kPushTag); });
      for (int64_t i = 0; i < r.size() && mine[0] == 0; ++i)
        if (got[std::size_t(i)] != float(r.begin + i + 1)) {
          mine[0] = 1, mine[1] = float(w), mine[2] = float(i), mine[3] = got[std::size_t(i)];
        }
    }
    for (int w = 0; w < roles.workers; ++w)
      exchange(roles, w, [&] { ctx.comm.send(answer.data(), r.size(), roles.worker_rank(w), kPullTag); });
  } else {  // a worker: one push and pull
    std::vector<float> grad(static_cast<std::size_t>(count)), params(static_cast<std::size_t>(count), 0.0f);
    for (int64_t i = 0; i < count; ++i) grad[std::size_t(i)] = float(i + 1);
    const int me = ctx.rank - servers;
    exchange(roles, me, [&] { push_and_pull(ctx.comm, roles, grad, params); });
    for (int64_t i = 0; i < count && mine[0] == 0; ++i)
      if (params[std::size_t(i)] != -float(i + 1)) mine[0] = 2, mine[1] = float(i), mine[2] = params[std::size_t(i)];
  }
  ctx.comm.all_reduce(found.data(), int64_t(found.size()), ReduceOp::Sum);
  if (!ctx.is_root()) return "";
  for (int rank = 0; rank < ctx.world; ++rank) {
    const float* f = found.data() + rank * kFields;
    if (f[0] == 1) {
      const Range r = roles.shard(rank);
      const int64_t i = int64_t(f[2]);
      return "server " + std::to_string(rank) + " (shard [" + std::to_string(r.begin) + ", " +
             std::to_string(r.end) + ")) got from worker " + std::to_string(int(f[1])) + " a push whose element " +
             std::to_string(i) + " is " + named(f[3], count, false) + ", not " + std::to_string(r.begin + i) +
             ": server s must receive exactly grad[shard(s).begin … shard(s).end), the slice at its shard's offset";
    }
    if (f[0] == 2) {
      const int64_t i = int64_t(f[1]);
      int s = 0;
      while (s + 1 < servers && roles.shard(s + 1).begin <= i) ++s;
      return "worker " + std::to_string(rank - servers) + "'s params[" + std::to_string(i) + "] holds " +
             named(f[2], count, true) + " after push_and_pull, but server " + std::to_string(s) +
             " (whose shard holds element " + std::to_string(i) + ") answered for element " + std::to_string(i) +
             ": params[shard(s)] must be exactly server s's answer, in place";
    }
  }
  return "";
}

}  // namespace dpt::ch09
