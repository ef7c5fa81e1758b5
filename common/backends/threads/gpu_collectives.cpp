// gpu_collectives.cpp — the threads backend's reductions when the buffers are
// GPU memory. The three phases are collectives.cpp's; only the share differs.
//
// The host path splits all_reduce into one chunk per rank and reduces into a
// shared host scratch. GPU ranks may sit on different GPUs, so there is no
// one place for a shared scratch: each rank reduces the whole vector, in rank
// order, into scratch on its own GPU (copying each peer's buffer there first,
// gpu_floats.h), and copies it into its buffer after phase B. Every rank runs
// the same adds in the same order, so all get the same bits — as the host
// path, at n times the work. Reduce-scatter needs no change of plan: rank r
// reduces row r of everyone's input, straight into its output.
//
// Before a rank posts its slot, its own streams have finished writing the
// buffers (Communicator called finish_gpu_work): peers read them from their
// own streams.
#include "comm/gpu_floats.h"
#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

namespace {
// Pointers to element `offset` of every rank's send buffer, in rank order.
std::vector<const float*> inputs_at(const std::vector<Slot>& slots, int64_t offset) {
  std::vector<const float*> inputs;
  for (const Slot& s : slots) inputs.push_back(static_cast<const float*>(s.send) + offset);
  return inputs;
}
}  // namespace

void World::all_reduce_on_gpu(int me, float* data, int64_t count, ReduceOp op, int device) {
  Floats result(device, count), staging(device, count);
  Slot slot{{Collective::AllReduce, count, 0, op, true}, data, data};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        reduce_on_gpu(device, result.data(), inputs_at(slots, 0).data(), size_, count, op,
                      staging.data());
      },
      [&] { copy_floats(data, result.data(), count); });
}

void World::reduce_scatter_on_gpu(int me, const float* send_buf, float* recv_buf, int64_t recv_count,
                                  ReduceOp op, int device) {
  // Staged when recv_buf overlaps our send_buf (which peers read until phase
  // B) or lives on another GPU than the one that reduces.
  bool direct = gpu_of(recv_buf) == device && !overlaps(recv_buf, recv_count * 4, send_buf, recv_count * 4 * size_);
  Floats staged(device, direct ? 0 : recv_count), staging(device, recv_count);
  float* out = direct ? recv_buf : staged.data();
  Slot slot{{Collective::ReduceScatter, recv_count, 0, op, true}, send_buf, recv_buf};
  collective(
      me, slot,
      [&](const std::vector<Slot>& slots) {
        reduce_on_gpu(device, out, inputs_at(slots, me * recv_count).data(), size_, recv_count, op,
                      staging.data());
      },
      [&] {
        if (!direct) copy_floats(recv_buf, out, recv_count);
      });
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
