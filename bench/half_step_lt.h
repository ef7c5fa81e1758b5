// half_step_lt.h — bench_gpu_half's 16-bit step with the elementwise passes
// fused into cuBLASLt epilogues (dpt/gpu_half_lt.h): the same arithmetic as
// HalfStep (half_step.h), whose buffers it uses, in fewer launches:
//   hidden layer  y16 = relu(x16·W16ᵀ + b16), ReLU's mask kept as bits  (one GEMM: BiasRelu)
//   last layer    logits = x16·W16ᵀ + b, fp32                           (one GEMM: Bias)
//   weight grad   dW = dyᵀ·x and db = Σ_batch dy, fp32                   (one GEMM: BiasGradient)
//   input grad    dx16 = dy·W masked by the ReLU below                   (one GEMM: ReluBackward)
// HalfStep needs a bias+ReLU kernel per hidden layer, a ReLU-backward kernel
// and a db GEMM per layer on top of the same GEMMs.
//
// Two roundings differ from HalfStep's: a hidden output is rounded once,
// after its bias and ReLU (HalfStep rounds the GEMM's output, then again
// after the bias), and a hidden layer's bias is rounded to 16 bits first
// (cuBLASLt adds a bias of the output's type; PyTorch's autocast casts the
// bias to 16 bits too). Both are within the bench's 16-bit tolerances.
//
// The constructor plans every GEMM (cuBLASLt picks its algorithms there) and
// throws dpt::Error naming the call and status when cuBLASLt refuses one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dpt/gpu_half_lt.h"
#include "half_step.h"

namespace dpt::bench {

struct LtHalfStep {
  HalfStep base;  // the fp32 masters, the batch, the 16-bit buffers and the loss
  std::vector<std::unique_ptr<Buffer16>> bias16;  // hidden layers' biases in 16 bits
  std::vector<std::unique_ptr<Buffer16>> masks;   // hidden layers' ReLU masks (bits, in 16-bit words)
  std::vector<std::unique_ptr<gpu::LtGemm>> forward, weight_grad, input_grad;  // per layer (input_grad[0] unused)
  Tensor& loss;

  LtHalfStep(Half f, const std::vector<int64_t>& w, const Tensor& batch_x, std::vector<int64_t> batch_labels,
             float rate)
      : base(f, w, batch_x, std::move(batch_labels), rate), loss(base.loss) {
    using gpu::Epilogue;
    const std::size_t layers = w.size() - 1;
    const int64_t batch = base.batch;
    for (std::size_t l = 0; l + 1 < layers; ++l) {
      bias16.push_back(std::make_unique<Buffer16>(w[l + 1]));
      masks.push_back(std::make_unique<Buffer16>(gpu::relu_mask_bytes(batch, w[l + 1]) / 2));
    }
    const uint16_t* in = base.x16.ptr;
    for (std::size_t l = 0; l < layers; ++l) {  // y (B, out) = x (B, in) · Wᵀ, W (out, in)
      const int64_t fan_in = w[l], fan_out = w[l + 1];
      gpu::LtOperands ops;
      ops.a = in, ops.b = base.w16[l]->ptr;
      if (l + 1 < layers) {
        ops.c16 = base.act16[l]->ptr, ops.bias = bias16[l]->ptr, ops.relu_mask = masks[l]->ptr;
        in = base.act16[l]->ptr;
      } else {
        ops.c32 = base.logits.data(), ops.bias = base.params[2 * l + 1].data();
      }
      forward.push_back(std::make_unique<gpu::LtGemm>(0, f, false, true, batch, fan_out, fan_in,
                                                      l + 1 < layers ? Epilogue::BiasRelu : Epilogue::Bias, ops));
    }
    for (std::size_t l = 0; l < layers; ++l) {
      const int64_t fan_in = w[l], fan_out = w[l + 1];
      const uint16_t* dy = l + 1 < layers ? base.dact16[l]->ptr : base.dlogits16.ptr;  // (B, out)
      gpu::LtOperands grad;  // dW (out, in) = dyᵀ·x, db (out) = dyᵀ's rows summed
      grad.a = dy, grad.b = l == 0 ? base.x16.ptr : base.act16[l - 1]->ptr;
      grad.c32 = base.dparams[2 * l].data(), grad.bias_grad = base.dparams[2 * l + 1].data();
      weight_grad.push_back(std::make_unique<gpu::LtGemm>(0, f, true, false, fan_out, fan_in, batch,
                                                          Epilogue::BiasGradient, grad));
      if (l == 0) {  // x needs no gradient
        input_grad.push_back(nullptr);
        continue;
      }
      gpu::LtOperands back;  // dx (B, in) = dy·W, through the ReLU of layer l−1 (whose output x was)
      back.a = dy, back.b = base.w16[l]->ptr, back.c16 = base.dact16[l - 1]->ptr, back.relu_mask = masks[l - 1]->ptr;
      input_grad.push_back(std::make_unique<gpu::LtGemm>(0, f, false, false, batch, fan_in, fan_out,
                                                         Epilogue::ReluBackward, back));
    }
  }

  void run() {
    const std::size_t layers = base.widths.size() - 1;
    base.cast_inputs();
    for (std::size_t l = 0; l + 1 < layers; ++l)  // hidden biases too: cuBLASLt adds a bias of the output's type
      gpu::round_to_half(bias16[l]->ptr, base.params[2 * l + 1].data(), base.widths[l + 1], base.format, 0);
    for (const auto& gemm : forward) gemm->run();
    base.loss_and_gradient();
    for (std::size_t l = layers; l-- > 0;) {  // layer l's dy is ready: its dW and db, then the dy below
      weight_grad[l]->run();
      if (l > 0) input_grad[l]->run();
    }
    base.update();
  }

  std::vector<std::vector<float>> weights() const { return base.weights(); }
  void set_weights(const std::vector<std::vector<float>>& all) { base.set_weights(all); }
};

}  // namespace dpt::bench
