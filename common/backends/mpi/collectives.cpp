// collectives.cpp — the MPI all-reduce and friends: MPI's non-blocking
// collectives (MPI_Iallreduce, ...) polled by wait_for, after a preflight.
//
// Preflight: every rank first all-gathers its {collective, count, root, op}
// (4 int64 per rank), so a rank passing a different count (or calling a
// different collective) gets a dpt::Error naming every rank's value
// (call_check.h, the same sentence as under threads) instead of MPI's
// undefined behaviour. It costs one tiny all-gather per call.
//
// Avg is MPI_SUM then a division by size(); Max is MPI_MAX.
#include <cstring>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

namespace {
MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Max ? MPI_MAX : MPI_SUM; }

void finish_op(ReduceOp op, float* data, int64_t count, int size) {
  if (op != ReduceOp::Avg) return;
  const float n = float(size);
  for (int64_t i = 0; i < count; ++i) data[i] /= n;
}

// An abandoned non-blocking call's buffer must outlive it: kept to the end.
void keep_until_exit(std::unique_ptr<int64_t[]> buffer) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<int64_t[]>> kept;
  std::lock_guard<std::mutex> lock(mutex);
  kept.push_back(std::move(buffer));
}
}  // namespace

void MpiBackend::wait_collective(const CollectiveCall& call, MPI_Request& request) {
  wait_for(collective_name(call.kind), -1, 0, call.count, [&] { return test(request); }, [] {});
}

void MpiBackend::preflight(const CollectiveCall& call) {
  // On the heap, not the stack: if a peer fails while this all-gather is in
  // flight we abandon it, and MPI may still write the result later.
  auto values = std::make_unique<int64_t[]>(4 * std::size_t(size_ + 1));  // everyone's, then ours
  int64_t* mine = values.get() + 4 * size_;
  mine[0] = int64_t(call.kind), mine[1] = call.count, mine[2] = call.root, mine[3] = int64_t(call.op);
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallgather(mine, 4, MPI_INT64_T, values.get(), 4, MPI_INT64_T, data_, &request));
  try {
    wait_collective(call, request);
  } catch (...) {
    keep_until_exit(std::move(values));
    throw;
  }
  std::vector<CollectiveCall> calls(size_);
  for (int r = 0; r < size_; ++r) {
    const int64_t* v = values.get() + 4 * r;
    calls[r] = {Collective(v[0]), v[1], int(v[2]), ReduceOp(v[3])};
  }
  std::string error = mismatch(calls);
  if (!error.empty()) DPT_FAIL(error);
}

void MpiBackend::all_reduce(float* data, int64_t count, ReduceOp op) {
  CollectiveCall call{Collective::AllReduce, count, 0, op};
  preflight(call);
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, "all_reduce"), MPI_FLOAT,
                               mpi_op(op), data_, &request));
  wait_collective(call, request);
  finish_op(op, data, count, size_);
}

void MpiBackend::reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                                ReduceOp op) {
  CollectiveCall call{Collective::ReduceScatter, recv_count, 0, op};
  preflight(call);
  bool staged = overlaps(recv_buf, 4 * recv_count, send_buf, 4 * recv_count * size_);
  std::vector<float> stage(staged ? recv_count : 0);
  float* out = staged ? stage.data() : recv_buf;
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Ireduce_scatter_block(send_buf, out, int_count(recv_count, "reduce_scatter"),
                                          MPI_FLOAT, mpi_op(op), data_, &request));
  wait_collective(call, request);
  if (staged) std::memcpy(recv_buf, out, 4 * recv_count);
  finish_op(op, recv_buf, recv_count, size_);
}

void MpiBackend::all_gather(const float* send_buf, float* recv_buf, int64_t send_count) {
  CollectiveCall call{Collective::AllGather, send_count, 0, ReduceOp::Sum};
  preflight(call);
  int n = int_count(send_count, "all_gather");
  int_count(send_count * size_, "all_gather");
  bool in_place = send_buf == recv_buf + rank_ * send_count;
  bool staged = !in_place && overlaps(recv_buf, 4 * send_count * size_, send_buf, 4 * send_count);
  std::vector<float> stage(staged ? send_count : 0);
  if (staged) std::memcpy(stage.data(), send_buf, 4 * send_count);
  const void* source = in_place ? MPI_IN_PLACE : staged ? stage.data() : send_buf;
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallgather(source, n, MPI_FLOAT, recv_buf, n, MPI_FLOAT, data_, &request));
  wait_collective(call, request);
}

void MpiBackend::broadcast(float* data, int64_t count, int root) {
  CollectiveCall call{Collective::Broadcast, count, root, ReduceOp::Sum};
  preflight(call);
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Ibcast(data, int_count(count, "broadcast"), MPI_FLOAT, root, data_, &request));
  wait_collective(call, request);
}

void MpiBackend::barrier() {
  CollectiveCall call{Collective::Barrier, 0, 0, ReduceOp::Sum};
  preflight(call);
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Ibarrier(data_, &request));
  wait_collective(call, request);
}

void MpiBackend::all_gather_bytes(const void* send, void* recv, int64_t bytes) {
  CollectiveCall call{Collective::GatherBytes, bytes, 0, ReduceOp::Sum};
  preflight(call);
  int n = int_count(bytes, "all_gather_bytes");
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, data_, &request));
  wait_collective(call, request);
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
