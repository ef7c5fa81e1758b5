// process_environment.cpp — where this process runs (launch.h): the rank
// and world a launcher (mpirun, srun, torchrun) put in the environment, the
// GPU a rank uses, and how many rank threads one process may hold.
#include <cerrno>
#include <cstdlib>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/launch.h"

namespace dpt {

// ----------------------------------------------------------------------------
// environment

namespace {
int parse_env_int(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value, &end, 10);
  DPT_CHECK(*value != '\0' && *end == '\0' && errno == 0 && parsed >= 0 && parsed <= 1 << 24,
            "environment variable " << name << "='" << value << "' is not a rank or process count");
  return int(parsed);
}
}  // namespace

ProcessEnvironment detect_process_environment() {
  struct Pair {
    const char* rank;
    const char* world;
  };
  static const Pair pairs[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                               {"PMI_RANK", "PMI_SIZE"},
                               {"SLURM_PROCID", "SLURM_NTASKS"},
                               {"RANK", "WORLD_SIZE"}};
  for (const Pair& p : pairs) {
    const char* rank = std::getenv(p.rank);
    const char* world = std::getenv(p.world);
    if (!rank || !world) continue;
    ProcessEnvironment env;
    env.under_launcher = true;
    env.rank = parse_env_int(p.rank, rank);
    env.world = parse_env_int(p.world, world);
    env.source = std::string(p.rank) + "/" + p.world;
    env.local_rank = env.rank;
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
      if (const char* local = std::getenv(name)) {
        env.local_rank = parse_env_int(name, local);
        break;
      }
    }
    DPT_CHECK(env.world >= 1 && env.rank < env.world,
              env.source << " say rank " << env.rank << " of " << env.world
                         << " processes: the rank must be below the count");
    return env;
  }
  return {};
}

int gpu_for_rank(int local_rank) {
  std::string reason = gpu::unavailable_reason();
  DPT_CHECK(reason.empty(), "--device cuda needs a usable GPU, and " << reason << " (use --device cpu)");
  return local_rank % gpu::device_count();
}

Device& single_device(const std::string& device) {
  return device == "cuda" ? Device::cuda(gpu_for_rank(0)) : Device::cpu(0);
}

std::string thread_ranks_problem(int64_t ranks, const std::string& comm) {
  if (comm != "threads" || ranks <= kMaxThreadRanks) return "";
  return std::to_string(ranks) + " rank threads: at most " + std::to_string(kMaxThreadRanks) +
         " run in one process (a ring's 2n(n-1) messages make the cost grow as n squared); run more ranks as "
         "processes with mpirun --comm mpi";
}

}  // namespace dpt
