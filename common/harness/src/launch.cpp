// launch.cpp — running fn once per rank: N threads of this process, or this
// process under mpirun. (Its flags: launch_flags.cpp; where the process runs:
// process_environment.cpp.)
//
// Both backends run each rank through run_rank(): call fn, wait for its async
// work, report a failure to the peers (comm.fail), then wait for every rank
// (comm.finish) so each learns whether anyone failed. Only what is around that
// differs: threads start N threads and rethrow the first failure's original
// exception; MPI (and NCCL, bootstrapped over MPI) runs once in this process
// and rethrows its own error, or a PeerFailed naming the rank that failed first.
#include "dpt/launch.h"

#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "backends.h"
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/options.h"

namespace dpt {

// ----------------------------------------------------------------------------
// running the ranks

namespace {

void validate(const LaunchOptions& o) {
  DPT_CHECK(o.ranks >= 1 && o.ranks <= kMaxRanks,
            "--ranks must be between 1 and " << kMaxRanks << ", got " << o.ranks);
  std::string too_many = thread_ranks_problem(o.ranks, o.comm);
  DPT_CHECK(too_many.empty(), "--ranks " << too_many);
  DPT_CHECK(o.timeout_s >= kMinCommTimeoutS && o.timeout_s <= kMaxCommTimeoutS,
            "--comm-timeout must be from " << kMinCommTimeoutS << " to " << kMaxCommTimeoutS << " seconds, got "
                                           << o.timeout_s);
  DPT_CHECK(o.eager_limit_bytes >= 0, "--eager-limit must be >= 0 bytes, got " << o.eager_limit_bytes);
  DPT_CHECK(o.comm == "threads" || o.comm == "mpi" || o.comm == "nccl",
            "--comm must be threads, mpi or nccl, got '" << o.comm << "'");
  DPT_CHECK(o.device == "cpu" || o.device == "cuda", "--device must be cpu or cuda, got '" << o.device << "'");
  if (o.device == "cuda") gpu_for_rank(0);  // throws, saying why, where no GPU is usable
  DPT_CHECK((o.link.gbps == 0 || (o.link.gbps >= kMinLinkGbps && o.link.gbps <= kMaxLinkGbps)) &&
                o.link.latency_us >= 0 && o.link.latency_us <= kMaxLinkLatencyUs,
            "--link-gbps must be 0 (none) or from " << kMinLinkGbps << " to " << kMaxLinkGbps
                                                    << ", and --link-latency-us from 0 to " << kMaxLinkLatencyUs
                                                    << "; got " << o.link.gbps << " and " << o.link.latency_us);
  link_preset(o.link_preset);  // throws on an unknown name
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

bool is_peer_failed(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailed&) {
    return true;
  } catch (...) {
    return false;
  }
}

using detail::CommAccess;
using detail::RankFailure;

struct RankOutcome {
  std::exception_ptr error;  // what this rank's fn threw, if anything
  RankFailure failure;       // the root cause, the same on every rank
};

// The rank's device: its simulated cpu:rank, or under --device cuda its GPU.
// Rank threads that share a GPU (more ranks than GPUs) each get their own
// memory account on it, cuda:K/rank, so each one's bytes, peak and capacity
// are its own, as a process's would be; one process per GPU keeps account 0.
Device& rank_device(const LaunchOptions& o, int rank, int local_rank, bool threads) {
  if (o.device != "cuda") return Device::cpu(rank);
  bool shared = threads && o.ranks > gpu::device_count();
  return Device::cuda(gpu_for_rank(local_rank), shared ? rank : 0);
}

// The device is picked inside the try: a GPU that fails there (Device::cuda
// throws) is this rank's error, reported as any other, not an exception
// escaping the rank's thread (std::terminate).
RankOutcome run_rank(Communicator& comm, const std::function<Device&()>& pick_device, Tracer& tracer,
                     const LaunchOptions& options, const std::function<void(Context&)>& fn) {
  RankOutcome out;
  // Outside the try: async work that fn queued may still use the Context while
  // the catch below drains it (chapter 05's ring jobs did, after it was gone).
  std::optional<Context> ctx;
  try {
    ctx.emplace(Context{comm.rank(), comm.size(), comm, pick_device(), tracer, options});
    fn(*ctx);
    comm.synchronize();  // async work issued by fn and never waited for
  } catch (...) {
    out.error = std::current_exception();
    CommAccess::fail(comm, message_of(out.error), !is_peer_failed(out.error));
    try {
      comm.synchronize();  // let pending async work fail fast against the stopped world
    } catch (...) {
    }
  }
  out.failure = CommAccess::finish(comm);
  return out;
}

[[noreturn]] void throw_peer_failure(const RankFailure& f) {
  throw PeerFailed(detail::format_error(
      __FILE__, __LINE__, "stopped because rank " + std::to_string(f.rank) + " failed: " + f.message));
}

void launch_threads(const LaunchOptions& o, const std::function<void(Context&)>& fn) {
  ProcessEnvironment env = detect_process_environment();
  DPT_CHECK(o.private_world || !env.under_launcher || env.world == 1,
            "this process is rank " << env.rank << " of " << env.world << " started by a launcher ("
                                    << env.source << "), but --comm threads runs every rank inside "
                                    << "one process: pass --comm mpi, or start a single process");
  // One origin for every rank's timeline: they share the process's clock.
  // (Tracers are declared first so they outlive the communicators.)
  TraceClock::time_point origin = TraceClock::now();
  std::vector<std::unique_ptr<Tracer>> tracers;
  for (int r = 0; r < o.ranks; ++r)
    tracers.push_back(std::make_unique<Tracer>(r, !o.trace_path.empty(), origin));
  auto comms = detail::make_threads_world(o.ranks, {o.timeout_s, effective_link(o), o.eager_limit_bytes});
  for (int r = 0; r < o.ranks; ++r) CommAccess::set_tracer(*comms[r], tracers[r].get());
  std::vector<RankOutcome> outcomes(o.ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      set_error_rank(r);
      outcomes[r] = run_rank(*comms[r], [&]() -> Device& { return rank_device(o, r, r, true); }, *tracers[r], o, fn);
    });
  }
  for (auto& t : threads) t.join();

  // Written even after a failure (the timeline shows where each rank was) when
  // launch is called alone; inside run_guarded's OutputRun a failed run
  // publishes no output, this one included (output_file.h).
  if (!o.trace_path.empty()) {
    std::vector<std::string> parts;
    for (auto& t : tracers) parts.push_back(t->events_json());
    write_chrome_trace(o.trace_path, parts);
  }
  const RankFailure& failure = outcomes[0].failure;  // every rank got the same
  if (!failure.any()) return;
  if (outcomes[failure.rank].error) std::rethrow_exception(outcomes[failure.rank].error);
  DPT_FAIL(failure.message);  // e.g. messages nobody received
}

// One rank per process, under mpirun: --comm mpi or --comm nccl.
void launch_processes(const LaunchOptions& o, const std::function<void(Context&)>& fn) {
  DPT_CHECK(!effective_link(o).enabled(),
            "--link/--link-gbps/--link-latency-us simulate a network for --comm threads; under "
            "--comm " << o.comm << " the real network is measured, so drop them");
  ProcessEnvironment env = detect_process_environment();
  // The rank's GPU is made current before MPI starts: a CUDA-aware MPI would
  // otherwise open a context on GPU 0 in every process of the node.
  if (o.device == "cuda") gpu::set_current_device(gpu_for_rank(env.local_rank));
  // Collective: every process gets here, and it ends with a barrier, so the
  // clocks read just after agree to within the barrier's exit skew.
  std::unique_ptr<Communicator> comm = o.comm == "nccl"
                                           ? detail::make_nccl_communicator(o.timeout_s, env.local_rank)
                                           : detail::make_mpi_communicator(o.timeout_s);
  TraceClock::time_point origin = TraceClock::now();
  set_error_rank(comm->rank());
  DPT_CHECK(!(o.ranks_given || o.ranks != 1) || o.ranks == comm->size(),
            "--ranks " << o.ranks << " but " << comm->size() << " MPI process(es) were started: "
                       << "under --comm mpi every process is one rank, so start it with mpirun -np "
                       << o.ranks << " ... --comm " << o.comm << " (or drop --ranks)");
  Tracer tracer(comm->rank(), !o.trace_path.empty(), origin);
  CommAccess::set_tracer(*comm, &tracer);
  RankOutcome out = run_rank(
      *comm, [&]() -> Device& { return rank_device(o, comm->rank(), env.local_rank, false); }, tracer, o, fn);
  CommAccess::set_tracer(*comm, nullptr);
  if (!out.failure.any() && !o.trace_path.empty()) gather_and_write_trace(*comm, tracer, o.trace_path);
  if (out.error) std::rethrow_exception(out.error);
  if (out.failure.unreceived) DPT_FAIL(out.failure.message);  // nobody threw: a send nobody received
  if (out.failure.any()) throw_peer_failure(out.failure);
}

}  // namespace

void launch(const LaunchOptions& options, const std::function<void(Context&)>& fn) {
  validate(options);
  if (options.comm == "threads") launch_threads(options, fn);
  else launch_processes(options, fn);
}

int run_lecture(const std::string& program, const LaunchOptions& options,
                const std::function<int(Context&)>& lecture) {
  int verdict_code = 0;  // rank 0's: every rank checks, rank 0 reports
  int code = run_guarded(program, [&] {
    launch(options, [&](Context& ctx) {
      int rank_code = lecture(ctx);
      if (ctx.is_root()) verdict_code = rank_code;
    });
  });
  return code != 0 ? code : verdict_code;
}

}  // namespace dpt
