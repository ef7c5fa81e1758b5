// call_check.h — do all ranks agree on the collective they are calling? Both
// backends gather every rank's {collective, count, root, op} before moving
// data (threads: in the shared slots; MPI: a small all-gather first) and ask
// mismatch() for the sentence naming the ranks that differ.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt {
namespace detail {

/// The collectives a backend runs (all_gather_bytes is launch's plumbing).
enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, GatherBytes };
/// "all_reduce", "reduce_scatter", ...
const char* collective_name(Collective c);

/// One rank's call of a collective.
struct CollectiveCall {
  Collective kind = Collective::Barrier;  ///< which collective
  int64_t count = 0;                      ///< floats (bytes for GatherBytes)
  int root = 0;                           ///< broadcast's root (0 otherwise)
  ReduceOp op = ReduceOp::Sum;            ///< reductions' op (Sum otherwise)
  /// Threads reductions: the buffers are GPU memory. Every rank must agree (a
  /// host loop cannot read a peer's GPU buffer); MPI leaves it false.
  bool gpu_memory = false;
};

/// "" when every rank's call agrees; otherwise one sentence naming each rank's
/// value, e.g. "all_reduce: ranks passed different counts (rank 0: 10, rank 1:
/// 12): every rank must pass the same count". calls[r] is rank r's.
std::string mismatch(const std::vector<CollectiveCall>& calls);

}  // namespace detail
}  // namespace dpt
