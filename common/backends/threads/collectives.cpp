// collectives.cpp — the threads backend's library collectives, computed
// through shared slots rather than messages.
//
//   phase A  every rank posts its Slot (its call and buffers) and waits for
//            all; the last to arrive checks that the calls agree
//            (call_check.h). Abortable: a rank can still leave.
//   share    each rank does its part reading the others' buffers directly,
//            reducing in rank order (so every rank gets a serial loop's bits)
//   phase B  all wait again, so nobody returns and frees its buffers while a
//            peer may still read them. Not abortable, and needs no timeout:
//            every rank is past phase A and only copying.
//
// With a link model, each call then sleeps until the time the matching
// bandwidth-optimal algorithm would take (link_clock.cpp). Left out: any
// message-passing algorithm — chapter 04 builds those from sendrecv.
//
// GPU buffers: copies go through copy_floats (gpu_floats.h), and the two
// reductions take their own path (gpu_collectives.cpp).
#include <algorithm>
#include <cstring>
#include <exception>

#include "comm/gpu_floats.h"
#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

namespace {

// out[i] = op over ranks k (in rank order) of in_k[offset + i], i < count.
void reduce_in_rank_order(const std::vector<Slot>& slots, int64_t offset, int64_t count, float* out,
                          ReduceOp op) {
  if (count == 0) return;
  std::memcpy(out, static_cast<const float*>(slots[0].send) + offset, count * sizeof(float));
  for (std::size_t k = 1; k < slots.size(); ++k) {
    const float* in = static_cast<const float*>(slots[k].send) + offset;
    if (op == ReduceOp::Max) {
      for (int64_t i = 0; i < count; ++i) out[i] = in[i] > out[i] ? in[i] : out[i];
    } else {
      for (int64_t i = 0; i < count; ++i) out[i] += in[i];
    }
  }
  if (op == ReduceOp::Avg) {
    const float n = float(slots.size());
    for (int64_t i = 0; i < count; ++i) out[i] /= n;
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// the three phases

void World::collective(int me, const Slot& slot, const Share& share,
                       const std::function<void()>& after) {
  std::unique_lock<std::mutex> lock(mutex_);
  check_not_aborted();
  // ---- phase A: every rank posts its slot; the last one checks them all ----
  slots_[me] = slot;
  arrived_[me] = true;
  uint64_t generation = phase_a_;
  if (++arrived_count_ == size_) {
    std::vector<CollectiveCall> calls;
    for (const Slot& s : slots_) calls.push_back(s.call);
    collective_error_ = mismatch(calls);
    if (collective_error_.empty() && slot.call.kind == Collective::AllReduce && !slot.call.gpu_memory)
      scratch_.resize(slot.call.count);
    collective_start_ = Clock::now();
    arrived_count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++phase_a_;
    wake_all();
  } else {
    WaitState what{collective_name(slot.call.kind), -1, 0, slot.call.count, false};
    WaitScope scope(waits_[me], what);
    Clock::time_point deadline = Clock::now() + timeout_;
    while (phase_a_ == generation) {
      auto leave = [&] {  // un-post, so the others never read our buffers
        arrived_[me] = false;
        --arrived_count_;
      };
      std::string missing;
      bool one_finished = false;
      for (int r = 0; r < size_; ++r) {
        if (arrived_[r]) continue;
        missing += (missing.empty() ? "" : ", ") + name(r);
        one_finished = one_finished || finished_[r];
      }
      if (aborted_) {
        leave();
        check_not_aborted();
      }
      if (one_finished) {
        leave();
        DPT_FAIL(name(me) << " waits " << describe(what) << " for " << missing
                         << ", and one of them has finished its function without calling it");
      }
      if (Clock::now() >= deadline) {
        leave();
        throw_timeout(me, what, " for " + missing + ", which did not call it");
      }
      wake_[me]->wait_until(lock, deadline);
    }
  }
  if (!collective_error_.empty()) DPT_FAIL(collective_error_);
  std::vector<Slot> slots = slots_;
  Clock::time_point start = collective_start_;
  lock.unlock();

  // A share that throws (a CUDA error in a device copy) still goes through
  // phase B, or the other ranks would wait there forever; the error is
  // rethrown after it, and launch() stops the world with it.
  std::exception_ptr share_error;
  try {
    share(slots);
  } catch (...) {
    share_error = std::current_exception();
  }

  // ---- phase B: nobody leaves (and frees its buffers) before all shares are done ----
  lock.lock();
  generation = phase_b_;
  if (++done_count_ == size_) {
    done_count_ = 0;
    ++phase_b_;
    wake_all();
  } else {
    while (phase_b_ == generation) wake_[me]->wait(lock);
  }
  lock.unlock();
  if (share_error) std::rethrow_exception(share_error);
  after();
  if (link_.enabled()) sleep_on_link(me, start + to_duration(modelled_seconds(slot.call)), "collective");
}

// ----------------------------------------------------------------------------
// the collectives

void World::all_reduce(int me, float* data, int64_t count, ReduceOp op) {
  int device = count == 0 ? -1 : gpu_of(data);  // nothing to move: no buffer to ask about
  if (device >= 0) return all_reduce_on_gpu(me, data, count, op, device);
  // Rank r reduces elements [r*chunk, (r+1)*chunk) into the shared scratch;
  // after phase B every rank copies the whole result out (so all agree bit
  // for bit, and nobody overwrites its input while a peer still reads it).
  const int64_t chunk = (count + size_ - 1) / size_;
  const int64_t begin = std::min(count, me * chunk), end = std::min(count, begin + chunk);
  Slot slot{{Collective::AllReduce, count, 0, op}, data, data};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        reduce_in_rank_order(slots, begin, end - begin, scratch_.data() + begin, op);
      },
      [&] {
        if (count) std::memcpy(data, scratch_.data(), count * sizeof(float));
      });
}

void World::reduce_scatter(int me, const float* send_buf, float* recv_buf, int64_t recv_count,
                           ReduceOp op) {
  int device = recv_count == 0 ? -1 : gpu_of(send_buf);
  if (device >= 0) return reduce_scatter_on_gpu(me, send_buf, recv_buf, recv_count, op, device);
  // Write straight into recv_buf unless it overlaps our send_buf, which peers
  // are reading until phase B, or lives on a GPU (the reduction here is a
  // host loop: staged, then copied there).
  bool direct = gpu_of(recv_buf) < 0 && !overlaps(recv_buf, recv_count * 4, send_buf, recv_count * 4 * size_);
  std::vector<float> staged(direct ? 0 : recv_count);
  float* out = direct ? recv_buf : staged.data();
  Slot slot{{Collective::ReduceScatter, recv_count, 0, op}, send_buf, recv_buf};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) { reduce_in_rank_order(slots, me * recv_count, recv_count, out, op); },
      [&] {
        if (!direct) copy_floats(recv_buf, out, recv_count);
      });
}

void World::all_gather(int me, const float* send_buf, float* recv_buf, int64_t send_count) {
  const std::size_t row = send_count * sizeof(float);
  // In place (send_buf is our own row of recv_buf) needs no staging: we never
  // write that row, and peers only read it.
  bool in_place = send_buf == recv_buf + me * send_count;
  bool direct = in_place || !overlaps(recv_buf, row * size_, send_buf, row);
  std::vector<float> staged(direct ? 0 : send_count * size_);
  float* out = direct ? recv_buf : staged.data();
  Slot slot{{Collective::AllGather, send_count, 0, ReduceOp::Sum}, send_buf, recv_buf};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        for (int k = 0; k < size_; ++k)
          if (!(in_place && k == me))
            copy_floats(out + k * send_count, static_cast<const float*>(slots[k].send), send_count);
      },
      [&] {
        if (!direct) copy_floats(recv_buf, out, send_count * size_);
      });
}

void World::broadcast(int me, float* data, int64_t count, int root) {
  Slot slot{{Collective::Broadcast, count, root, ReduceOp::Sum}, data, data};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        if (me != root) copy_floats(data, static_cast<const float*>(slots[root].send), count);
      },
      [] {});
}

void World::barrier(int me) {
  collective(me, Slot{}, [](const std::vector<Slot>&) {}, [] {});
}

void World::all_gather_bytes(int me, const void* send, void* recv, int64_t bytes) {
  Slot slot{{Collective::GatherBytes, bytes, 0, ReduceOp::Sum}, send, recv};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        for (int k = 0; k < size_; ++k)
          if (bytes) std::memcpy(static_cast<char*>(recv) + k * bytes, slots[k].send, bytes);
      },
      [] {});
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
