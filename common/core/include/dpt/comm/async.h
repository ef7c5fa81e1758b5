/// @file async.h
/// @brief `Work`: the handle of a non-blocking communication
/// (`Communicator::async`, `Communicator::all_reduce_async`).
///
///     auto work = ctx.comm.all_reduce_async(bucket, dpt::ReduceOp::Avg);  // returns at once
///     ...                                    // backward keeps computing meanwhile
///     work->wait();                          // bucket now holds the average
///
/// Each rank has one progress thread that runs its async work in issue order;
/// a blocking call made while work is pending waits its turn behind it, so a
/// program means the same with or without _async. Left out: cancelling work,
/// priorities, more than one progress thread per rank.
#pragma once

namespace dpt {

/// Handle of a non-blocking operation (see Communicator::async).
class Work {
 public:
  virtual ~Work();
  /// Blocks until the operation has finished; rethrows its error, if any.
  virtual void wait() = 0;
  /// True once the operation has finished (successfully or not).
  virtual bool done() = 0;
};

}  // namespace dpt
