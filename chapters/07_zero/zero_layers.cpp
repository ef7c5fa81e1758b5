// zero_layers.cpp — the zero_linear op (parameters in → compute → parameters
// out, in forward and again in backward) and stage 3's --prefetch.
//
// The buffers live on the rank's device, host memory (cpu:k) or a GPU
// (cuda:k): the host never reads them through a pointer. On a GPU a
// prefetched gather runs on a stream of its own; the blocks it fills are
// handed back to that stream only once the compute stream is done reading
// them (retire).
#include "zero_layers.h"

#include "dpt/autograd.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"

namespace dpt::ch07 {

struct ZeroLayers::Impl {
  Context& ctx;
  ZeroState& state;
  std::vector<int64_t> widths;
  bool prefetch_on;
  GradDestination destination;
  GradReady ready;
  std::vector<Tensor> handles;  // per layer: an empty leaf that makes autograd call zero_linear's backward
  std::vector<std::shared_ptr<Work>> prefetching;  // layer → its gather in flight
  std::unique_ptr<gpu::Stream> gather_stream;      // on a GPU: where prefetched gathers run
  std::vector<char> on_gather_stream;              // layer → its gathered block came from gather_stream
  struct Retiring {                                // a released block of the gather stream's, and the
    Tensor block;                                  // compute stream's point after its last reads
    std::shared_ptr<gpu::Event> used;
  };
  std::vector<Retiring> retiring;

  int layer_count() const { return int(state.layers.size()); }

  // ---- a layer's parameters, from the stage (ch07.h), and back to it
  Tensor acquire(int l, int next) {
    wait_prefetch(l);
    retire();  // no gather runs now: the blocks released since the last one may go back
    if (!state.gathered[std::size_t(l)].defined()) on_gather_stream[std::size_t(l)] = 0;
    Tensor w;
    {
      auto span = ctx.trace.span("parameters of layer " + std::to_string(l), state.stage == 3 ? "comm" : "compute");
      w = layer_parameters(state, l);
    }
    if (prefetch_on && state.stage == 3 && next >= 0 && next < layer_count()) prefetch(next);
    return w;
  }
  void release(int l, Tensor& w) {
    w = Tensor();  // our handle goes first: the stage decides about the rest
    const Tensor& block = state.gathered[std::size_t(l)];
    if (gather_stream && on_gather_stream[std::size_t(l)] && block.defined()) {
      // A block of the gather stream's goes back to that stream's cache, and
      // the next gather may take it while the compute stream still reads it:
      // it retires at the next retire(), when no gather runs, once the gather
      // stream has been made to wait for this point.
      gpu::set_current_device(ctx.device.index());
      auto used = std::make_shared<gpu::Event>();
      used->record(gpu::current_stream(ctx.device.index()));
      retiring.push_back({block, used});
    }
    layer_done(state, l);
  }
  // Only while no gather runs (none queued, or just waited for).
  void retire() {
    for (const Retiring& r : retiring) gather_stream->wait(*r.used);
    retiring.clear();  // the blocks go back to the gather stream's cache
  }
  void wait_prefetch(int l) {
    if (l >= 0 && l < layer_count() && prefetching[std::size_t(l)]) {
      prefetching[std::size_t(l)]->wait();
      prefetching[std::size_t(l)].reset();
    }
  }
  void gather_now(int l) {
    auto span = ctx.trace.span("gather layer " + std::to_string(l) + " ahead", "comm");
    Tensor& slot = state.gathered[std::size_t(l)];
    slot = gather_layer(ctx.comm, state.part, state.layers[std::size_t(l)], state.params, ctx.device);
  }
  void prefetch(int l) {
    if (state.gathered[std::size_t(l)].defined()) return;
    // Queued on the progress thread; the rank thread waits for it before it
    // talks again (acquire, or zero_linear_backward), so the two never
    // interleave messages on one communicator.
    if (ctx.device.is_host_memory()) {
      prefetching[std::size_t(l)] = ctx.comm.async([this, l] { gather_now(l); });
      return;
    }
    // On a GPU the gather runs on its own stream, after `ready` (the compute
    // stream's work so far, Adam's last writes to the shard included), so it
    // overlaps the layer the compute stream is busy with. The job synchronizes
    // its stream before it completes.
    const int gpu = ctx.device.index();
    gpu::set_current_device(gpu);
    if (!gather_stream) gather_stream = std::make_unique<gpu::Stream>(gpu);
    on_gather_stream[std::size_t(l)] = 1;
    auto ready_event = std::make_shared<gpu::Event>();
    ready_event->record(gpu::current_stream(gpu));
    prefetching[std::size_t(l)] = ctx.comm.async([this, l, gpu, ready_event] {
      gpu::set_current_device(gpu);
      gather_stream->wait(*ready_event);
      gpu::StreamGuard guard(*gather_stream);
      try {
        gather_now(l);
      } catch (...) {
        try {
          gather_stream->synchronize();  // nothing of it may still write once the error is out
        } catch (const std::exception&) {  // a GPU in error: the gather's own error is the one to tell
        }
        throw;
      }
      gather_stream->synchronize();
    });
  }

  // ---- the op: y = x Wᵀ + b, with W and b only present while used
  Tensor zero_linear(int l, const Tensor& x) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor w = acquire(l, l + 1), y;
    {
      auto span = ctx.trace.span("forward layer " + std::to_string(l), "compute");
      NoGradGuard no_graph;  // this op records itself below, holding x but not W
      y = linear(x, w.slice(0, out * in).reshape({out, in}), w.slice(out * in, out));
    }
    release(l, w);
    return record(y, "zero_linear", {x, handles[std::size_t(l)]},
                  [this, l, x](const Tensor& dy) -> std::vector<Tensor> { return zero_linear_backward(l, x, dy); });
  }
  // dx = dy W (B, in), dW = dyᵀ x (out, in), db = Σ_rows dy (out)
  std::vector<Tensor> zero_linear_backward(int l, const Tensor& x, const Tensor& dy) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor w = acquire(l, l - 1), dx;
    Tensor dest = destination(l);
    {
      auto span = ctx.trace.span("backward layer " + std::to_string(l), "compute");
      Tensor dweight = dest.slice(0, out * in).reshape({out, in});
      gemm(dy, true, x, false, dweight);
      Tensor dbias = dest.slice(out * in, out);  // the core's linear() sums its bias gradient the same way
      kernels_for(ctx.device).sum_rows(dbias.data(), dy.data(), dy.size(0), out);
      if (x.requires_grad()) {
        dx = Tensor::empty(x.shape(), x.device());
        gemm(dy, false, w.slice(0, out * in).reshape({out, in}), false, dx);
      }
    }
    dest = Tensor();
    release(l, w);
    wait_prefetch(l - 1);  // the next layer's gather is done before this rank talks again
    ready(l);
    return {dx, Tensor()};
  }
};

ZeroLayers::ZeroLayers(Context& ctx, ZeroState& state, const std::vector<int64_t>& widths, bool prefetch,
                       GradDestination destination, GradReady ready)
    : impl_(new Impl{ctx, state, widths, prefetch, std::move(destination), std::move(ready), {}, {}, {}, {}, {}}) {
  const std::size_t n = state.layers.size();
  for (std::size_t l = 0; l < n; ++l) {
    impl_->handles.push_back(Tensor::empty({0}, ctx.device));
    impl_->handles.back().set_requires_grad(true);
  }
  impl_->prefetching.resize(n);
  impl_->on_gather_stream.assign(n, 0);
}

ZeroLayers::~ZeroLayers() {
  // No prefetch may outlive the buffers it writes. Its error (a peer failed
  // while we were already unwinding) is not ours to report twice.
  for (auto& work : impl_->prefetching) {
    try {
      if (work) work->wait();
    } catch (const std::exception&) {
    }
  }
  try {
    if (impl_->gather_stream) {
      impl_->retire();
      impl_->gather_stream->synchronize();  // its waits too, before it is destroyed
    }
  } catch (const std::exception&) {
  }
}

Tensor ZeroLayers::forward(const Tensor& x) {
  Tensor h = x;
  for (int l = 0; l < impl_->layer_count(); ++l) {
    h = impl_->zero_linear(l, h);
    if (l + 1 < impl_->layer_count()) h = relu(h);
  }
  return h;
}

void ZeroLayers::finish_step() { impl_->retire(); }

}  // namespace dpt::ch07
