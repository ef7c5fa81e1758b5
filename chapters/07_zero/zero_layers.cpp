// zero_layers.cpp — the zero_linear op (parameters in → compute → parameters
// out, in forward and again in backward, through the stage's use_layer) and
// stage 3's --prefetch.
//
// The buffers live on the rank's device, host memory (cpu:k) or a GPU
// (cuda:k): the host never reads them through a pointer. A prefetched gather
// is a job of dpt/prefetch.h (the progress thread; on a GPU a stream of its
// own, its blocks handed back only after this stream's last read).
#include "zero_layers.h"

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "dpt/prefetch.h"

namespace dpt::ch07 {

struct ZeroLayers::Impl {
  Context& ctx;
  ZeroState& state;
  std::vector<int64_t> widths;
  bool prefetch_on;
  GradDestination destination;
  GradReady ready;
  std::vector<Tensor> handles;  // per layer: an empty leaf that makes autograd call zero_linear's backward
  Prefetch ahead;               // layer → its gather started ahead of its use

  int layer_count() const { return int(state.layers.size()); }

  // ---- one use of layer l's parameters (ch07.h's use_layer), `next` gathered meanwhile
  void with_layer(int l, int next, const std::function<void(const Tensor& w)>& compute) {
    const bool gathered_ahead = ahead.take(l);
    ahead.retire();  // no gather runs now: the blocks read since the last one may go back
    auto span = ctx.trace.span("parameters of layer " + std::to_string(l), state.stage == 3 ? "comm" : "compute");
    use_layer(state, l, [&](const Tensor& w) {
      span.end();  // the span covers what the stage does before the use (the gather)
      DPT_CHECK(w.defined() && w.numel() == state.layers[std::size_t(l)].size(),
                "use_layer (exercises/07_zero/layers.cpp) handed layer " << l << " "
                    << (w.defined() ? std::to_string(w.numel()) + " floats" : std::string("an undefined tensor"))
                    << "; the layer has " << state.layers[std::size_t(l)].size()
                    << " parameters (were they let go before their use?)");
      if (prefetch_on && state.stage == 3 && next >= 0 && next < layer_count()) gather_ahead(next);
      compute(w);
      if (gathered_ahead) ahead.used(w);
    });
  }
  // The gather is use_layer's own, on the progress thread: a use that keeps
  // the parameters for the layer's next use, which finds them in its slot.
  void gather_ahead(int l) {
    if (state.gathered[std::size_t(l)].defined()) return;
    ahead.start(l, [this, l] {
      auto span = ctx.trace.span("gather layer " + std::to_string(l) + " ahead", "comm");
      Tensor kept;
      use_layer(state, l, [&kept](const Tensor& w) { kept = w; });
      state.gathered[std::size_t(l)] = kept;
    });
  }

  // ---- the op: y = x Wᵀ + b, with W and b only present while used
  Tensor zero_linear(int l, const Tensor& x) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor y;
    with_layer(l, l + 1, [&](const Tensor& w) {
      auto span = ctx.trace.span("forward layer " + std::to_string(l), "compute");
      NoGradGuard no_graph;  // this op records itself below, holding x but not W
      y = linear(x, w.slice(0, out * in).reshape({out, in}), w.slice(out * in, out));
    });
    return record(y, "zero_linear", {x, handles[std::size_t(l)]},
                  [this, l, x](const Tensor& dy) -> std::vector<Tensor> { return zero_linear_backward(l, x, dy); });
  }
  // dx = dy W (B, in), dW = dyᵀ x (out, in), db = Σ_rows dy (out)
  std::vector<Tensor> zero_linear_backward(int l, const Tensor& x, const Tensor& dy) {
    const int64_t in = widths[std::size_t(l)], out = widths[std::size_t(l) + 1];
    Tensor dx;
    with_layer(l, l - 1, [&](const Tensor& w) {
      Tensor dest = destination(l);
      auto span = ctx.trace.span("backward layer " + std::to_string(l), "compute");
      Tensor dweight = dest.slice(0, out * in).reshape({out, in});
      gemm(dy, true, x, false, dweight);
      Tensor dbias = dest.slice(out * in, out);  // the core's linear() sums its bias gradient the same way
      kernels_for(ctx.device).sum_rows(dbias.data(), dy.data(), dy.size(0), out);
      if (x.requires_grad()) {
        dx = Tensor::empty(x.shape(), x.device());
        gemm(dy, false, w.slice(0, out * in).reshape({out, in}), false, dx);
      }
    });
    ahead.wait(l - 1);  // the gather started ahead is done before this rank talks again
    ready(l);
    return {dx, Tensor()};
  }
};

ZeroLayers::ZeroLayers(Context& ctx, ZeroState& state, const std::vector<int64_t>& widths, bool prefetch,
                       GradDestination destination, GradReady ready)
    : impl_(new Impl{ctx, state, widths, prefetch, std::move(destination), std::move(ready), {},
                     Prefetch(ctx.comm, ctx.device, int(state.layers.size()))}) {
  for (std::size_t l = 0; l < state.layers.size(); ++l) {
    impl_->handles.push_back(Tensor::empty({0}, ctx.device));
    impl_->handles.back().set_requires_grad(true);
  }
}

ZeroLayers::~ZeroLayers() = default;  // the Prefetch waits for any gather still in flight

Tensor ZeroLayers::forward(const Tensor& x) {
  Tensor h = x;
  for (int l = 0; l < impl_->layer_count(); ++l) {
    h = impl_->zero_linear(l, h);
    if (l + 1 < impl_->layer_count()) h = relu(h);
  }
  return h;
}

void ZeroLayers::finish_step() { impl_->ahead.retire(); }

}  // namespace dpt::ch07
