/// @file launch.h
/// @brief `dpt::launch(options, fn)`: runs `fn(Context&)` once per rank — on N
/// threads of this process (`--comm threads`, the default) or once in every
/// process that mpirun/srun started (`--comm mpi`, or `--comm nccl` on GPUs).
///
/// `--device cuda` puts each rank on a GPU: under threads rank r gets GPU
/// r % GPUs, so several ranks may share one GPU, each thread queuing on its
/// own stream and, when they share, counting its bytes in its own memory
/// account there (`cuda:K/r`, device.h); under mpirun the process's local rank
/// on its node (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK) picks
/// the GPU, account 0 (`cuda:K`).
///
///     int main(int argc, char** argv) {
///       CLI::App app{"ch04: ring all-reduce"};
///       dpt::LaunchOptions launch_options;
///       dpt::add_launch_flags(app, launch_options);
///       dpt::parse_flags(app, argc, argv);                  // options.h
///       return dpt::run_guarded("ch04", [&] {
///         dpt::launch(launch_options, [&](dpt::Context& ctx) {
///           auto span = ctx.trace.span("step", "compute");
///           ctx.comm.all_reduce(grad.data(), grad.numel(), dpt::ReduceOp::Avg);
///         });
///       });
///     }
///
///     build/bin/ch04 --ranks 4 --link ethernet --trace ring.json   # 4 threads
///     mpirun -np 4 build/bin/ch04 --comm mpi                       # 4 processes
///     build/bin/ch04 --ranks 4 --device cuda                       # 4 threads on the GPUs
///     mpirun -np 8 build/bin/ch04 --comm nccl --device cuda        # 8 GPUs, NCCL
///
/// Errors. If any rank's function throws, the other ranks are stopped (a rank
/// blocked on it throws dpt::PeerFailed instead of hanging) and launch()
/// rethrows the root cause on the calling thread: the first rank's own error
/// ("[rank 2] ...", with file:line under DPT_DEBUG=1), never a PeerFailed echo of it, whatever the
/// threads' timing. Under MPI every process's launch() throws: the failing
/// rank its own error, the others PeerFailed("stopped because rank 2 failed:
/// ..."); main() prints it and exits non-zero, and MPI still finalises cleanly.
///
/// Left out: elastic membership, restarting failed ranks, several ranks per
/// MPI process, choosing GPUs other than round-robin.
#pragma once

#include "dpt/cli_fwd.h"
#include <functional>
#include <string>

#include "dpt/comm.h"
#include "dpt/device.h"
#include "dpt/trace.h"

namespace dpt {

/// --comm-timeout's default, in seconds: 30, and 120 in the sanitizer builds,
/// whose ranks run 5 to 15 times slower (a rank computing for 30 s there is
/// not frozen; tests that judge a timeout set their own).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr double kDefaultCommTimeoutS = 120;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr double kDefaultCommTimeoutS = 120;
#else
constexpr double kDefaultCommTimeoutS = 30;
#endif
#else
constexpr double kDefaultCommTimeoutS = 30;
#endif

/// How to run the ranks; add_launch_flags() fills it from the command line.
struct LaunchOptions {
  int ranks = 1;                     ///< --ranks N (>= 1); under mpi, must match the process count
  bool ranks_given = false;          ///< set when --ranks was on the command line
  std::string comm = "threads";      ///< --comm threads | mpi | nccl
  std::string device = "cpu";        ///< --device cpu | cuda: where each rank's tensors live
  double timeout_s = kDefaultCommTimeoutS;  ///< --comm-timeout SECONDS (> 0, finite)
  /// --eager-limit BYTES: under threads, a send of more bytes waits until its
  /// receive is posted (rendezvous), a smaller one is buffered (eager). 65536
  /// is Open MPI's TCP transport limit (btl_tcp_eager_limit; `ompi_info --param
  /// btl all --level 9 | grep eager_limit`), so an unsafe send order deadlocks
  /// here as it would under mpirun. Not used under --comm mpi (MPI has its own).
  int64_t eager_limit_bytes = 65536;
  std::string link_preset = "none";  ///< --link none | pcie | nvlink | ethernet | infiniband
  LinkModel link{};                  ///< --link-gbps / --link-latency-us; fields > 0 override the preset
  std::string trace_path;            ///< --trace FILE: write a Chrome trace timeline ("" = off)
  /// Threads only, not a flag: a private world of rank threads even inside a
  /// process that mpirun started (chapter 08 records its algorithms' messages
  /// on such worlds from rank 0). Off, launch refuses --comm threads there.
  bool private_world = false;
};

/// What one rank's function gets.
struct Context {
  int rank;                      ///< 0 <= rank < world
  int world;                     ///< number of ranks
  Communicator& comm;            ///< this rank's endpoint
  Device& device;                ///< cpu:rank, or its GPU under --device cuda (its own account when shared)
  Tracer& trace;                 ///< this rank's timeline and seconds per category
  const LaunchOptions& options;  ///< what launch() was called with
  /// Rank 0 prints, writes files, and reports.
  bool is_root() const { return rank == 0; }
};

/// The most ranks --ranks accepts (under --comm mpi: processes).
constexpr int kMaxRanks = 4096;
/// The most rank threads one process runs (--comm threads). A ring all-reduce
/// moves 2n(n−1) messages and every step needs all n threads, so on one
/// machine the cost grows with n²: chapter 07 takes ~2 s a step at 64 rank
/// threads, ~6 s at 128 and ~23 s at 256 on 2 cores. Beyond that, mpirun.
constexpr int kMaxThreadRanks = 256;
/// "" when `ranks` ranks may run as `comm` ("threads", "mpi", "nccl"), else
/// the sentence why not (more than kMaxThreadRanks rank threads). Checked at
/// parse time (exit 2) and again by launch().
std::string thread_ranks_problem(int64_t ranks, const std::string& comm);
/// --comm-timeout bounds, in seconds: 1 ms to 10^6 s (11.6 days, "forever" for
/// a teaching run; a deadline of 10^10 s would overflow the clock's int64 ns).
constexpr double kMinCommTimeoutS = 1e-3;
/// Upper --comm-timeout bound (see kMinCommTimeoutS).
constexpr double kMaxCommTimeoutS = 1e6;
/// --link-gbps bounds: 1 Mbit/s (slower would sleep for hours per step) to 1 Pbit/s.
constexpr double kMinLinkGbps = 1e-3;
/// Upper --link-gbps bound (see kMinLinkGbps).
constexpr double kMaxLinkGbps = 1e6;
/// --link-latency-us bound: one second per message (a geostationary satellite hop is 0.25 s).
constexpr double kMaxLinkLatencyUs = 1e6;

/// Registers `--device cpu|cuda` into `device` with `help`; `cuda` where no
/// GPU is usable is refused at parse time, saying why. add_launch_flags()
/// registers it for the ranks; the one-device chapters (01, 02) call it alone.
void add_device_flag(CLI::App& app, std::string& device,
                     const std::string& help = "Where the model computes: cpu (a simulated device) or cuda (GPU 0)");
/// A one-device chapter's device: cpu:0, or cuda:0 for "cuda".
Device& single_device(const std::string& device);

/// The GPU of a rank under --device cuda: `local_rank % gpu::device_count()`.
/// Throws dpt::Error naming gpu::unavailable_reason() when no GPU is usable.
int gpu_for_rank(int local_rank);

/// Registers --ranks, --comm, --device, --comm-timeout, --eager-limit, --link,
/// --link-gbps, --link-latency-us and --trace on `app`, writing into `options` (which must
/// outlive parsing). A bad value is a CLI::ValidationError naming the flag;
/// so is `--device cuda` where no GPU is usable (it says why).
void add_launch_flags(CLI::App& app, LaunchOptions& options);

/// The link model launch() simulates: the preset, with the explicitly set
/// (> 0) fields of options.link replacing the preset's.
LinkModel effective_link(const LaunchOptions& options);

/// Runs `fn` once per rank and returns when every rank has returned. Threads:
/// `options.ranks` threads, each with set_error_rank(rank). MPI and NCCL: once
/// in this process, as its MPI rank. Writes options.trace_path at the end, if set.
/// Throws dpt::Error on bad options (a sentence saying what to do), and
/// rethrows a failing rank's error as described in the file comment.
void launch(const LaunchOptions& options, const std::function<void(Context&)>& fn);

/// What run_chapter (lecture.h) ends with: runs `lecture` on every rank
/// under run_guarded (options.h) and returns the program's exit code — the
/// error's (1) when a rank failed, else rank 0's verdict code (0 or
/// kVerdictFailed, verdict.h).
int run_lecture(const std::string& program, const LaunchOptions& options,
                const std::function<int(Context&)>& lecture);

/// Which launcher (if any) started this process, from its environment.
struct ProcessEnvironment {
  bool under_launcher = false;  ///< true when one of the variable pairs below is set
  int rank = 0;                 ///< this process's rank, 0 <= rank < world
  int world = 1;                ///< number of processes started
  int local_rank = 0;           ///< this process's rank on its node (picks its GPU); `rank` if not given
  std::string source;           ///< e.g. "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"; "" if none
};

/// Reads, first match wins: OMPI_COMM_WORLD_RANK/SIZE (Open MPI's mpirun),
/// PMI_RANK/PMI_SIZE (MPICH, Intel MPI), SLURM_PROCID/SLURM_NTASKS (srun),
/// RANK/WORLD_SIZE (torchrun style). Both variables of a pair must be set.
/// The local rank: OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK,
/// first set wins. Throws dpt::Error when a value is not a number or rank >= world.
ProcessEnvironment detect_process_environment();

}  // namespace dpt
