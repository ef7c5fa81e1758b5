/// @file prefetch.h
/// @brief `Prefetch`: work started ahead of its use, overlapping the rank's
/// own (stage 3 of ZeRO gathers the next layer while this one computes).
///
///     dpt::Prefetch ahead(ctx.comm, ctx.device, layers);
///     ahead.start(l + 1, [&] { next = gather(l + 1); });  // returns at once
///     compute(l);                                         // meanwhile
///     if (ahead.take(l + 1)) { …use next…; ahead.used(next); }
///
/// A job runs on the communicator's progress thread (comm/async.h), so its
/// messages never interleave with the rank's own: the rank waits for a job
/// before it talks again. On a GPU the job's work goes to a stream of its own
/// that starts after everything the rank had queued when it was started; a
/// block the job allocated and the rank then read goes back to that stream's
/// memory only once the rank's stream has passed its last read (`used`,
/// `retire`). In host memory there is no stream to order: `used` and `retire`
/// do nothing. Left out: more than one job in flight per slot, cancelling.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "dpt/comm.h"
#include "dpt/device.h"
#include "dpt/tensor.h"

namespace dpt {

/// Jobs in numbered slots (0 … slots−1), each started ahead and waited for once.
class Prefetch {
 public:
  /// For `comm`'s rank, whose buffers live on `device`.
  Prefetch(Communicator& comm, Device& device, int slots);
  /// Waits for every job still in flight (a job writes into its caller's
  /// buffers); their errors are not reported twice while unwinding.
  ~Prefetch();
  Prefetch(const Prefetch&) = delete;
  Prefetch& operator=(const Prefetch&) = delete;

  /// Starts `job` for `slot` (none may be in flight there) and returns at once.
  void start(int slot, std::function<void()> job);
  /// Waits for `slot`'s job if one is in flight, rethrowing its error.
  void wait(int slot);
  /// wait(slot), then: true if a job of `slot` finished since the last take(slot).
  bool take(int slot);
  /// The rank is done reading `block`, which a job allocated: it returns to the
  /// job stream's memory at the next retire(), after the rank's reads so far.
  void used(const Tensor& block);
  /// Hands back the blocks `used` since the last call. Only while no job runs.
  void retire();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt
