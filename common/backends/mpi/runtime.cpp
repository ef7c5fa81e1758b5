// runtime.cpp — MPI's start and end, and the MPI backend's construction.
//
// MPI_Init_thread asks for MPI_THREAD_MULTIPLE, so chapter 05's async
// all-reduce can run on the progress thread while the rank thread computes.
// If the library offers less, thread_safe() is false and async work runs at
// once on the calling thread (correct, without overlap). MPI is finalised at
// exit, unless someone else initialised it.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

namespace {
int g_thread_level = MPI_THREAD_SINGLE;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

void ensure_mpi_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {  // someone else started MPI: they finalise it too
      MPI_Query_thread(&g_thread_level);
      return;
    }
    // Open MPI 4.1's non-blocking all-reduce (libnbc), which all_reduce
    // polls, picks a binomial tree for in-place calls: the naive algorithm,
    // slow for large vectors. Ask for its ring, unless the user chose.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
    DPT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &g_thread_level));
    std::atexit(finalize_at_exit);
  });
}

int thread_level() { return g_thread_level; }

int int_count(int64_t count, const char* call) {
  DPT_CHECK(count <= INT_MAX, call << ": " << count
                                   << " elements is more than MPI's int counts allow (2^31-1)");
  return int(count);
}

void back_off(Clock::duration waited) {
  if (waited < std::chrono::microseconds(100)) return;
  if (waited < std::chrono::milliseconds(5)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(100));
}

std::string peer_evidence(const char* call, int peer, int pending) {
  if (peer < 0) return "";
  const std::string other = "rank " + std::to_string(peer);
  const std::string stopped = "it waits on another rank, or it stopped (frozen, or far slower)";
  if (std::strcmp(call, "send to") == 0) {
    std::string rendezvous = "; above MPI's eager limit a send waits until " + other + " posts its receive "
                             "(rendezvous)";
    if (pending == 1) return rendezvous + ", and " + other + " is sending to this rank too: both ranks are sending, each "
                             "waiting for the other to receive";
    if (pending == 0) return rendezvous + ", and " + other + " sends nothing to this rank either: " + stopped;
    return rendezvous + ": if " + other + " is sending to this rank too, both ranks are sending, each waiting for the "
                        "other to receive; or " + other + " stopped (frozen, or far slower)";
  }
  if (pending == 0) return "; " + other + " has sent this rank nothing: " + stopped;
  if (pending == 2) return "; " + other + " began sending this message and never finished: it stopped (frozen), or "
                           "it is far slower";
  return "";
}

std::string timeout_message(int rank, double timeout_s, const char* call, int peer, int tag,
                            int64_t count, const std::string& evidence) {
  std::ostringstream msg;
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f", timeout_s);
  const char* floats = count == 1 ? " float" : " floats";
  msg << "rank " << rank << " waited " << waited << " s in " << call;
  if (peer >= 0) msg << " rank " << peer << " (tag " << tag << ", " << count << floats << ")";
  else if (std::strcmp(call, "barrier") == 0) msg << ": some rank has not called it";
  else msg << " (" << count << floats << "): some rank has not called it";
  msg << evidence << "; under MPI the other ranks' states are not visible here: look for their own "
                     "messages (raise --comm-timeout if a peer is only slow)";
  return msg.str();
}

MpiBackend::MpiBackend(MPI_Comm data, MPI_Comm control, double timeout_s)
    : timeout_s_(timeout_s), data_(data), control_(control), abort_buffer_(kAbortBytes, '\0') {
  MPI_Comm_rank(data_, &rank_);
  MPI_Comm_size(data_, &size_);
  sent_to_ = std::make_unique<std::atomic<int64_t>[]>(std::size_t(size_));
  received_from_ = std::make_unique<std::atomic<int64_t>[]>(std::size_t(size_));
  for (int r = 0; r < size_; ++r) sent_to_[r] = 0, received_from_[r] = 0;
  DPT_MPI_CHECK(MPI_Irecv(abort_buffer_.data(), kAbortBytes, MPI_CHAR, MPI_ANY_SOURCE, kAbortTag,
                          control_, &abort_request_));
}

MpiBackend::~MpiBackend() {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (abort_request_ != MPI_REQUEST_NULL) {  // finish() never ran
    MPI_Cancel(&abort_request_);
    MPI_Wait(&abort_request_, MPI_STATUS_IGNORE);
  }
  for (MPI_Request& r : abort_sends_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  MPI_Comm_free(&data_);
  if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
}

std::unique_ptr<MpiBackend> make_backend(double timeout_s) {
  ensure_mpi_initialised();
  MPI_Comm data, control;
  DPT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &data));
  DPT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control));
  // Errors come back as return codes, which DPT_MPI_CHECK turns into dpt::Error.
  DPT_MPI_CHECK(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN));
  DPT_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
  return std::make_unique<MpiBackend>(data, control, timeout_s);
}

}  // namespace mpi

// Called by factory_mpi.cpp.
std::unique_ptr<Communicator> new_mpi_communicator(double timeout_s) {
  std::unique_ptr<mpi::MpiBackend> backend = mpi::make_backend(timeout_s);
  int rank = backend->rank(), size = backend->size();
  auto comm = CommAccess::wrap(stage_gpu_buffers(std::move(backend), size), rank, size, timeout_s,
                               TrafficLog(size).view(rank));
  // Every process leaves here together (launch() reads its clock next).
  DPT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  return comm;
}

}  // namespace detail
}  // namespace dpt
