// half_step.h — bench_gpu_half's 16-bit step on cuda:0, written out over
// dpt/gpu_half.h (what it keeps in which format: bench_gpu_half.cpp's header
// comment; the fp32 step it is checked and timed against: gpu_training_step.h).
// Every buffer is allocated up front, so a CUDA graph of run() writes only
// memory it owns.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/ops.h"

namespace dpt::bench {


// ----------------------------------------------------------------------------
// 16-bit buffers on cuda:0

struct Buffer16 {
  uint16_t* ptr = nullptr;
  explicit Buffer16(int64_t n) {
    ptr = static_cast<uint16_t*>(gpu::allocate(0, std::size_t(n) * sizeof(uint16_t)));
    DPT_CHECK(ptr, "bench_gpu_half: no room on cuda:0 for " << n << " 16-bit values");
  }
  ~Buffer16() { gpu::free(0, ptr); }
  Buffer16(const Buffer16&) = delete;
  Buffer16& operator=(const Buffer16&) = delete;
};

// ----------------------------------------------------------------------------
// the steps

// The 16-bit step of the header comment, every buffer allocated up front, so
// a CUDA graph of run() writes only memory this object owns.
struct HalfStep {
  Half format;
  std::vector<int64_t> widths;
  int64_t batch;
  float lr;
  Rng rng;
  MLP model;  // the fp32 masters: fc_l.weight (out, in), fc_l.bias (out); the same seed as its TrainingStep's
  std::vector<Tensor> params, dparams;  // W0, b0, W1, b1, … and their fp32 gradients
  Tensor x, logits, probs, dlogits, loss, one;
  std::vector<int64_t> labels;
  Buffer16 x16, ones16, dlogits16;
  std::vector<std::unique_ptr<Buffer16>> w16, act16, dact16;  // per layer; act16/dact16 for hidden layers

  HalfStep(Half f, const std::vector<int64_t>& w, const Tensor& batch_x, std::vector<int64_t> batch_labels, float rate)
      : format(f), widths(w), batch(batch_x.shape()[0]), lr(rate), rng(7), model(w, Device::cuda(0), rng),
        params(model.parameters()), x(batch_x), labels(std::move(batch_labels)), x16(batch * w.front()),
        ones16(batch), dlogits16(batch * w.back()) {
    Device& gpu = Device::cuda(0);
    for (const Tensor& p : params) dparams.push_back(Tensor::empty(p.shape(), gpu));
    logits = Tensor::empty({batch, w.back()}, gpu), probs = Tensor::empty({batch, w.back()}, gpu);
    dlogits = Tensor::empty({batch, w.back()}, gpu), loss = Tensor::empty({1}, gpu);
    one = Tensor::full({1}, 1.0f, gpu);
    Tensor ones = Tensor::full({batch}, 1.0f, gpu);
    gpu::round_to_half(ones16.ptr, ones.data(), batch, format, 0);
    for (std::size_t l = 0; l + 1 < w.size(); ++l) {
      w16.push_back(std::make_unique<Buffer16>(w[l] * w[l + 1]));
      if (l + 2 < w.size()) {
        act16.push_back(std::make_unique<Buffer16>(batch * w[l + 1]));
        dact16.push_back(std::make_unique<Buffer16>(batch * w[l + 1]));
      }
    }
    gpu::synchronize(0);  // `ones` is freed at the end of the constructor
  }

  // x and every weight cast to 16 bits from the fp32 masters (LtHalfStep's too).
  void cast_inputs() {
    gpu::round_to_half(x16.ptr, x.data(), x.numel(), format, 0);
    for (std::size_t l = 0; l + 1 < widths.size(); ++l)
      gpu::round_to_half(w16[l]->ptr, params[2 * l].data(), params[2 * l].numel(), format, 0);
  }
  // From the logits: the loss, its gradient in fp32, and that cast to 16 bits.
  void loss_and_gradient() {
    Kernels& k = cuda_kernels(0);
    const int64_t classes = widths.back();
    k.softmax_cross_entropy(probs.data(), loss.data(), logits.data(), labels.data(), batch, classes);
    k.softmax_cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), one.data(), batch, classes);
    gpu::round_to_half(dlogits16.ptr, dlogits.data(), dlogits.numel(), format, 0);
  }
  // SGD on the fp32 masters from the fp32 gradients.
  void update() {
    Kernels& k = cuda_kernels(0);
    for (std::size_t i = 0; i < params.size(); ++i)
      k.sgd_step(params[i].data(), dparams[i].data(), lr, 0.0f, params[i].numel());
  }

  void run() {
    Kernels& k = cuda_kernels(0);
    const std::size_t layers = widths.size() - 1;
    // forward: x (B, in) → … → logits (B, classes)
    cast_inputs();
    const uint16_t* in = x16.ptr;
    for (std::size_t l = 0; l < layers; ++l) {
      const int64_t fan_in = widths[l], fan_out = widths[l + 1];
      if (l + 1 < layers) {  // y = relu(x·Wᵀ + b), stored in 16 bits
        gpu::gemm_half(0, format, false, true, batch, fan_out, fan_in, 1.0f, in, w16[l]->ptr, 0.0f, act16[l]->ptr);
        gpu::add_bias_relu_half(act16[l]->ptr, params[2 * l + 1].data(), batch, fan_out, true, format, 0);
        in = act16[l]->ptr;
      } else {  // logits in fp32
        gpu::gemm_half(0, format, false, true, batch, fan_out, fan_in, 1.0f, in, w16[l]->ptr, 0.0f, logits.data());
        k.add_bias(logits.data(), params[2 * l + 1].data(), batch, fan_out);
      }
    }
    // backward: dy (B, out) in 16 bits from the logits' gradient down
    loss_and_gradient();
    const uint16_t* dy = dlogits16.ptr;
    for (std::size_t l = layers; l-- > 0;) {
      const int64_t fan_in = widths[l], fan_out = widths[l + 1];
      const uint16_t* layer_in = l == 0 ? x16.ptr : act16[l - 1]->ptr;
      // dW (out, in) = dyᵀ·x; db (1, out) = 1ᵀ·dy: fp32, for the fp32 masters
      gpu::gemm_half(0, format, true, false, fan_out, fan_in, batch, 1.0f, dy, layer_in, 0.0f, dparams[2 * l].data());
      gpu::gemm_half(0, format, false, false, 1, fan_out, batch, 1.0f, ones16.ptr, dy, 0.0f, dparams[2 * l + 1].data());
      if (l == 0) break;  // x needs no gradient
      // dx (B, in) = dy·W, then through the ReLU whose output act16[l−1] is
      gpu::gemm_half(0, format, false, false, batch, fan_in, fan_out, 1.0f, dy, w16[l]->ptr, 0.0f, dact16[l - 1]->ptr);
      gpu::relu_backward_half(dact16[l - 1]->ptr, act16[l - 1]->ptr, batch * fan_in, format, 0);
      dy = dact16[l - 1]->ptr;
    }
    update();
  }

  std::vector<std::vector<float>> weights() const {
    std::vector<std::vector<float>> all;
    for (const Tensor& p : params) all.push_back(p.to_vector());
    return all;
  }
  void set_weights(const std::vector<std::vector<float>>& all) {  // no allocation on the GPU
    for (std::size_t i = 0; i < params.size(); ++i)
      gpu::copy(params[i].data(), all[i].data(), all[i].size() * sizeof(float), 0);
  }
};

}  // namespace dpt::bench
