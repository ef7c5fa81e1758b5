/// @file watch.h
/// @brief `watch_messages`: a communicator that passes every call on to
/// another one and tells an observer about each point-to-point message first.
/// How a chapter watches an algorithm it did not write (chapter 04 draws the
/// ring's state before each step) and how tests read an algorithm's messages
/// call by call, without a hook in the algorithm's code.
///
///     auto watched = dpt::watch_messages(ctx.comm, [&](const dpt::Message& m) { draw(); });
///     ch04::ring_scatter_reduce(*watched, data, count);   // draw() before each sendrecv
///
/// The watched communicator is the same rank of the same world: its messages
/// are `inner`'s (same traffic log, same trace). Use it from the rank's own
/// thread, with no async work of `inner`'s in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "dpt/comm/communicator.h"

namespace dpt {

/// One point-to-point call, as the watched communicator received it. A send
/// has src = -1 and recv_count = 0; a recv has dst = -1 and send_count = 0.
struct Message {
  const char* call = "";   ///< "send", "recv" or "sendrecv"
  int dst = -1;            ///< where it sends (-1: nowhere)
  int64_t send_count = 0;  ///< floats sent
  int src = -1;            ///< where it receives from (-1: nowhere)
  int64_t recv_count = 0;  ///< floats received
  const float* send_data = nullptr;  ///< where the sent floats begin (null: nothing sent)
  const float* recv_data = nullptr;  ///< where the received floats go (null: nothing received)
};

/// Called before each point-to-point message is passed on; it may use
/// `inner` (e.g. a collective that every rank reaches at the same message).
using MessageObserver = std::function<void(const Message&)>;

/// A communicator for the same rank that forwards every call to `inner`'s
/// backend, calling `before` ahead of each send, recv and sendrecv. `inner`
/// must outlive it.
std::unique_ptr<Communicator> watch_messages(Communicator& inner, MessageObserver before);

}  // namespace dpt
