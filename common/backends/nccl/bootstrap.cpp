// bootstrap.cpp — how an NCCL world starts and ends.
//
//   1. MPI starts (an MpiBackend: the control plane for the whole run).
//   2. Every rank all-gathers its GPU's PCI bus id and its host name over MPI.
//      Two ranks on one GPU are refused, on every rank alike (so nobody
//      hangs): NCCL needs one GPU per rank (--comm threads shares GPUs).
//   3. Rank 0 makes the ncclUniqueId; every rank gets it over MPI (rank 0's
//      row of an all-gather).
//   4. ncclCommInitRankConfig on every rank, non-blocking (every NCCL call
//      then returns at once and is polled: stream_wait.cpp), waited for with
//      the communicator's timeout: a rank that never joins is a Timeout
//      sentence, not a hang.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "library_check.h"
#include "nccl/nccl_backend.h"

namespace dpt {
namespace detail {
namespace nccl {

namespace {
constexpr std::size_t kIdentityBytes = 256;  // "<bus id>\0<host>\0", zero-padded

std::string host_name() {
  char name[kIdentityBytes / 2] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Step 2: "" when every rank has a GPU of its own, else the sentence.
std::string shared_gpu(mpi::MpiBackend& control, int device) {
  std::vector<char> mine(kIdentityBytes, '\0'), all(kIdentityBytes * control.size());
  std::string bus = gpu::pci_bus_id(device), host = host_name();
  std::memcpy(mine.data(), bus.c_str(), std::min(bus.size(), kIdentityBytes / 2 - 1));
  std::memcpy(mine.data() + kIdentityBytes / 2, host.c_str(), std::min(host.size(), kIdentityBytes / 2 - 1));
  control.all_gather_bytes(mine.data(), all.data(), int64_t(kIdentityBytes));
  auto bus_of = [&](int r) { return std::string(all.data() + r * kIdentityBytes); };
  auto host_of = [&](int r) { return std::string(all.data() + r * kIdentityBytes + kIdentityBytes / 2); };
  for (int a = 0; a < control.size(); ++a)
    for (int b = a + 1; b < control.size(); ++b)
      if (bus_of(a) == bus_of(b) && host_of(a) == host_of(b)) {
        std::ostringstream msg;
        msg << "ranks " << a << " and " << b << " both got GPU " << bus_of(a) << " on host " << host_of(a)
            << ": NCCL needs one GPU per rank; run -np <= number of GPUs, or use --comm threads "
               "for several ranks on one GPU";
        return msg.str();
      }
  return "";
}

// Step 3: rank 0's unique id, on every rank.
ncclUniqueId shared_unique_id(mpi::MpiBackend& control) {
  ncclUniqueId mine{};
  if (control.rank() == 0) DPT_NCCL_CHECK(ncclGetUniqueId(&mine));
  std::vector<ncclUniqueId> all(control.size());
  control.all_gather_bytes(&mine, all.data(), int64_t(sizeof(ncclUniqueId)));
  return all[0];
}
}  // namespace

NcclBackend::NcclBackend(std::unique_ptr<mpi::MpiBackend> control, ncclComm_t comm, int device,
                         double timeout_s)
    : control_(std::move(control)),
      comm_(comm),
      device_(device),
      timeout_s_(timeout_s),
      stream_(device),
      barrier_scratch_(device, 1) {}

// A non-blocking communicator ends in two steps: ncclCommFinalize (flushes
// what is under way; polled, at most the timeout) then ncclCommDestroy; one
// that does not finalize in time (a peer gone) is aborted instead. No throw
// from a destructor: errors here change nothing.
NcclBackend::~NcclBackend() {
  if (aborted_) return;  // ncclCommAbort freed it
  cudaSetDevice(device_);
  ncclResult_t state = ncclCommFinalize(comm_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
  }
  if (state == ncclSuccess) ncclCommDestroy(comm_);
  else ncclCommAbort(comm_);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclSum;  // then divide_for_avg
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

}  // namespace nccl

// Called by factory_nccl.cpp, with the GPU this process's local rank picked.
std::unique_ptr<Communicator> new_nccl_communicator(double timeout_s, int device) {
  std::unique_ptr<mpi::MpiBackend> control = mpi::make_backend(timeout_s);
  int rank = control->rank(), size = control->size();
  std::string shared = nccl::shared_gpu(*control, device);
  DPT_CHECK(shared.empty(), shared);
  ncclUniqueId id = nccl::shared_unique_id(*control);
  DPT_CUDA_CHECK(cudaSetDevice(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // no NCCL call holds the host: each is polled (stream_wait.cpp)
  ncclComm_t comm = nullptr;
  ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  // A communicator whose init failed or timed out is ended with ncclCommAbort
  // (NCCL's rule after an error), once, so its threads do not outlive the throw.
  bool aborted = false;
  std::unique_ptr<nccl::NcclBackend> backend;
  auto abort_init = [&] {
    if (comm && !aborted) ncclCommAbort(comm);
    aborted = true;
  };
  try {
    DPT_CHECK(started == ncclSuccess || started == ncclInProgress,
              "ncclCommInitRankConfig failed on rank " << rank << ": " << ncclGetErrorString(started));
    control->wait_for(
        "ncclCommInitRank", -1, 0, 0,
        [&] {
          ncclResult_t state = ncclSuccess;
          DPT_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
          DPT_CHECK(state == ncclSuccess || state == ncclInProgress,
                    "ncclCommInitRank failed on rank " << rank << ": " << ncclGetErrorString(state));
          return state == ncclSuccess;
        },
        abort_init);
    backend = std::make_unique<nccl::NcclBackend>(std::move(control), comm, device, timeout_s);
  } catch (...) {  // init failed, or the backend's stream or scratch: the communicator is not the backend's yet
    abort_init();
    throw;
  }
  backend->barrier();  // every process leaves here together (launch() reads its clock next)
  return CommAccess::wrap(std::move(backend), rank, size, timeout_s, TrafficLog(size).view(rank));
}

}  // namespace detail
}  // namespace dpt
