// stage.cpp — a pipeline stage and its step (stage.h).
#include "stage.h"

#include <algorithm>
#include <chrono>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch13 {

LayerRange stage_layers(int layers, int stages, int stage) {
  DPT_CHECK(stages >= 1 && stages <= layers && stage >= 0 && stage < stages,
            "stage_layers: stage " << stage << " of " << stages << " over " << layers << " layers");
  const int base = layers / stages, extra = layers % stages;
  const int first = stage * base + std::min(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

PipelineStage::PipelineStage(const MLP& model, int stage, int stages)
    : range(stage_layers(int(model.layers().size()), stages, stage)) {
  for (int l = range.first; l < range.last; ++l) layers.push_back(model.layers()[std::size_t(l)]);
  has_last_layer = range.last == int(model.layers().size());
}

std::vector<Tensor> PipelineStage::parameters() const {
  std::vector<Tensor> params;
  for (const Linear& layer : layers) params.push_back(layer.weight), params.push_back(layer.bias);
  return params;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

StageStep pipeline_step(Communicator& comm, PipelineStage& stage, const Batch& batch, int micro_batches,
                        const std::vector<Op>& ops, SpanRecorder* trace) {
  const int64_t batch_size = batch.x.shape()[0];
  DPT_CHECK(micro_batches >= 1 && batch_size % micro_batches == 0,
            micro_batches << " micro-batches do not divide a batch of " << batch_size);
  const int64_t size = batch_size / micro_batches;
  Device& device = batch.x.device();
  const bool first = comm.rank() == 0;
  std::vector<Tensor> params = stage.parameters();
  std::vector<Tensor> batch_grads;
  for (const Tensor& p : params) batch_grads.push_back(Tensor::zeros(p.shape(), device));
  const int64_t in_width = stage.layers.front().weight.shape()[1], out_width = stage.layers.back().weight.shape()[0];

  // Per micro-batch: the input leaf (stages > 0) and the output (the loss on
  // the last stage) whose graph holds the activations until B m.
  std::vector<Tensor> inputs(static_cast<std::size_t>(micro_batches)), outputs(static_cast<std::size_t>(micro_batches));
  std::vector<double> held(static_cast<std::size_t>(micro_batches), 0.0);
  StageStep step;
  int in_flight = 0;
  double holding = 0;

  StageWork work;
  work.input_buffer = [&](int) { return Tensor::empty({size, in_width}, device); };
  work.output_grad_buffer = [&](int) { return Tensor::empty({size, out_width}, device); };
  work.forward = [&](int m, const Tensor& input) {
    TraceSpan span(trace, op_name({Pass::Forward, m}), "compute");
    const auto start = std::chrono::steady_clock::now();
    const double before = double(device.current_bytes());
    Tensor h;
    if (first) {
      h = batch.x.rows(m * size, (m + 1) * size);
    } else {
      DPT_CHECK(input.defined(), "stage " << comm.rank() << ": F" << m << " got no activation from stage " << comm.rank() - 1);
      h = inputs[std::size_t(m)] = input;
      h.set_requires_grad(true);  // a leaf: its gradient is what B m hands back
    }
    for (std::size_t l = 0; l < stage.layers.size(); ++l) {
      h = stage.layers[l].forward(h);
      if (!(stage.has_last_layer && l + 1 == stage.layers.size())) h = relu(h);
    }
    if (stage.has_last_layer) {
      std::vector<int64_t> labels(batch.y.begin() + m * size, batch.y.begin() + (m + 1) * size);
      h = softmax_cross_entropy(h, labels);  // micro-batch m's mean loss
      step.loss += double(h.item()) * double(size) / double(batch_size);
    }
    outputs[std::size_t(m)] = h;
    held[std::size_t(m)] = double(device.current_bytes()) - before;
    holding += held[std::size_t(m)];
    step.peak_in_flight = std::max(step.peak_in_flight, ++in_flight);
    step.peak_activation_bytes = std::max(step.peak_activation_bytes, holding);
    if (m == 0) step.micro_batch_bytes = held[0];
    step.ran.push_back({Pass::Forward, m});
    step.seconds.push_back(seconds_since(start));
    return stage.has_last_layer ? Tensor() : h;
  };
  work.backward = [&](int m, const Tensor& output_grad) {
    TraceSpan span(trace, op_name({Pass::Backward, m}), "compute");
    const auto start = std::chrono::steady_clock::now();
    Tensor out = outputs[std::size_t(m)];
    DPT_CHECK(out.defined(), "stage " << comm.rank() << ": B" << m << " before F" << m);
    for (Tensor& p : params) p.zero_grad();
    if (stage.has_last_layer) {
      backward(out);
    } else {
      DPT_CHECK(output_grad.defined(), "stage " << comm.rank() << ": B" << m << " got no gradient from stage " << comm.rank() + 1);
      backward(out, output_grad);  // the gradient stage rank+1 sent for our output
    }
    std::vector<Tensor> micro_grads;
    for (const Tensor& p : params) micro_grads.push_back(p.grad());
    accumulate_micro_batch(batch_grads, micro_grads, size, batch_size);
    Tensor input_grad = first ? Tensor() : inputs[std::size_t(m)].grad();
    outputs[std::size_t(m)] = inputs[std::size_t(m)] = Tensor();  // micro-batch m's activations are released
    holding -= held[std::size_t(m)];
    --in_flight;
    step.ran.push_back({Pass::Backward, m});
    step.seconds.push_back(seconds_since(start));
    return input_grad;
  };
  run_schedule(comm, ops, work);
  for (std::size_t i = 0; i < params.size(); ++i) params[i].set_grad(batch_grads[i]);
  return step;
}

}  // namespace dpt::ch13
