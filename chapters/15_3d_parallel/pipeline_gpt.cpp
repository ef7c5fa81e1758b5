// pipeline_gpt.cpp — one stage's step through chapter 13's schedule, and the
// model gathered from every stage (pipeline_gpt.h).
#include "pipeline_gpt.h"

#include <chrono>
#include <optional>
#include <iostream>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "gpt.h"
#include "stage.h"

namespace dpt::ch15 {

void add_since(AllReduces& total, const AllReduces& before, const AllReduces& after) {
  total.calls += after.calls - before.calls, total.bytes += after.bytes - before.bytes;
}

void add_since(Collectives& total, const Collectives& before, const Collectives& after) {
  add_since(total.all_gather, before.all_gather, after.all_gather);
  add_since(total.reduce_scatter, before.reduce_scatter, after.reduce_scatter);
}

AllReduces all_reduces_so_far(Communicator& group) {
  TrafficLog& log = group.traffic();
  return {double(log.collective_calls("all_reduce", log.rank())), double(log.collective_bytes("all_reduce", log.rank()))};
}

Collectives pair_so_far(Communicator& group) {
  TrafficLog& log = group.traffic();
  return {{double(log.collective_calls("all_gather", log.rank())), double(log.collective_bytes("all_gather", log.rank()))},
          {double(log.collective_calls("reduce_scatter", log.rank())),
           double(log.collective_bytes("reduce_scatter", log.rank()))}};
}

namespace {
double stage_seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
std::vector<int64_t> token_slice(const std::vector<int64_t>& all, int64_t begin, int64_t count) {
  return {all.begin() + begin, all.begin() + begin + count};
}
}  // namespace

std::vector<ch13::Op> stage_schedule(const std::string& schedule, int stage, int stages, int micro_batches) {
  DPT_CHECK(schedule == "1f1b" || schedule == "gpipe", "--schedule " << schedule << ": 1f1b or gpipe");
  if (schedule == "gpipe") return ch13::gpipe(stage, stages, micro_batches);
  if (stages > 1) return ch13::one_f_one_b(stage, stages, micro_batches);
  std::vector<ch13::Op> ops;  // one stage: nothing to wait for, each micro-batch forward then backward
  for (int m = 0; m < micro_batches; ++m) ops.push_back({ch13::Pass::Forward, m}), ops.push_back({ch13::Pass::Backward, m});
  return ops;
}

GptStageStep pipeline_gpt_step(Communicator& pp, const TensorParallelGpt& model, const TokenBatch& batch,
                               int64_t batch_size, int micro_batches, bool sp, const std::vector<ch13::Op>& ops,
                               StepChart* chart) {
  const int M = micro_batches;
  DPT_CHECK(M >= 1 && batch_size % M == 0, M << " micro-batches do not divide a batch of " << batch_size);
  Communicator& tp = model.group();
  const int64_t b = batch_size / M, T = int64_t(batch.inputs.size()) / batch_size, C = model.shape().width;
  const int64_t rows = b * T / (sp ? tp.size() : 1);  // the residual stream one micro-batch hands on, this rank's part
  std::vector<Tensor> params = model.parameters();
  Device& device = params.front().device();
  std::vector<Tensor> batch_grads;
  for (const Tensor& p : params) batch_grads.push_back(Tensor::zeros(p.shape(), device));
  std::vector<Tensor> inputs(static_cast<std::size_t>(M)), outputs(static_cast<std::size_t>(M));
  GptStageStep step;

  ch13::StageWork work;
  work.input_buffer = [&](int) { return Tensor::empty({rows, C}, device); };
  work.output_grad_buffer = [&](int) { return Tensor::empty({rows, C}, device); };
  work.forward = [&](int m, const Tensor& input) {
    std::optional<StepChart::Compute> span;  // on --slow-rank it lasts --slowdown times as long
    if (chart != nullptr) span.emplace(*chart, "forward");
    const auto start = std::chrono::steady_clock::now();
    const AllReduces ar = all_reduces_so_far(tp);
    const Collectives pair = pair_so_far(tp);
    Tensor in;
    if (!model.has_embeddings()) {
      DPT_CHECK(input.defined(), "stage " << pp.rank() << ": F" << m << " got no activation from stage " << pp.rank() - 1);
      in = inputs[std::size_t(m)] = input;
      in.set_requires_grad(true);  // a leaf: its gradient is what B m hands back
    }
    Tensor out = model.stage_forward(in, token_slice(batch.inputs, m * b * T, b * T),
                                     token_slice(batch.targets, m * b * T, b * T), b, sp);
    if (model.has_head()) step.loss += double(out.item()) / M;  // micro-batch m's mean × b/B
    outputs[std::size_t(m)] = out;
    add_since(step.traffic.forward, ar, all_reduces_so_far(tp));
    add_since(step.traffic.sp_forward, pair, pair_so_far(tp));
    step.ran.push_back({ch13::Pass::Forward, m});
    step.seconds.push_back(stage_seconds_since(start));
    return model.has_head() ? Tensor() : out;
  };
  work.backward = [&](int m, const Tensor& output_grad) {
    std::optional<StepChart::Compute> span;
    if (chart != nullptr) span.emplace(*chart, "backward");
    const auto start = std::chrono::steady_clock::now();
    const AllReduces ar = all_reduces_so_far(tp);
    const Collectives pair = pair_so_far(tp);
    Tensor out = outputs[std::size_t(m)];
    DPT_CHECK(out.defined(), "stage " << pp.rank() << ": B" << m << " before F" << m);
    for (Tensor& p : params) p.zero_grad();
    if (model.has_head()) {
      backward(out);
    } else {
      DPT_CHECK(output_grad.defined(), "stage " << pp.rank() << ": B" << m << " got no gradient from stage " << pp.rank() + 1);
      backward(out, output_grad);
    }
    std::vector<Tensor> micro_grads;
    for (const Tensor& p : params) micro_grads.push_back(p.grad());
    if (M == 1)
      batch_grads = micro_grads;  // the batch is its one micro-batch
    else
      ch13::accumulate_micro_batch(batch_grads, micro_grads, b, batch_size);  // your chapter 13
    Tensor input_grad = model.has_embeddings() ? Tensor() : inputs[std::size_t(m)].grad();
    outputs[std::size_t(m)] = inputs[std::size_t(m)] = Tensor();  // micro-batch m's activations are released
    add_since(step.traffic.backward, ar, all_reduces_so_far(tp));
    add_since(step.traffic.sp_backward, pair, pair_so_far(tp));
    step.ran.push_back({ch13::Pass::Backward, m});
    step.seconds.push_back(stage_seconds_since(start));
    return input_grad;
  };
  if (pp.size() > 1) {
    ch13::run_schedule(pp, ops, work);  // your chapter 13
  } else {  // one stage has no neighbour to exchange with: the ops in order, and tp x dp needs none of chapter 13
    for (const ch13::Op& op : ops)
      if (op.pass == ch13::Pass::Forward)
        work.forward(op.micro_batch, Tensor());
      else
        work.backward(op.micro_batch, Tensor());
  }
  for (std::size_t i = 0; i < params.size(); ++i) params[i].set_grad(batch_grads[i]);
  return step;
}

std::vector<float> gather_pipeline(Communicator& pp, const TensorParallelGpt& model, bool grads) {
  const std::vector<float> part = model.gather(grads);
  if (pp.size() == 1) return part;
  // Each stage writes its part where it sits in the whole; the others add zeros (exact).
  std::vector<float> whole(std::size_t(gpt_parameter_count(model.shape())), 0.0f);
  const std::size_t at = std::size_t(model.flat_offset());
  DPT_CHECK(at + part.size() <= whole.size(), "stage " << pp.rank() << "'s part does not fit the model");
  std::copy(part.begin(), part.end(), whole.begin() + std::ptrdiff_t(at));
  pp.all_reduce(whole.data(), int64_t(whole.size()), ReduceOp::Sum);
  return whole;
}

void print_stages(const GptShape& shape, int stages, int micro_batches, const std::string& schedule, const Narrator& say) {
  if (!say.enabled()) return;
  Table t(str("ch15: the pipeline, ", schedule, ", M = ", micro_batches), {"stage", "blocks", "also holds", "hands on per micro-batch"});
  for (int p = 0; p < stages; ++p) {
    const ch13::LayerRange r = ch13::stage_layers(shape.layers, stages, p);
    std::string also = p == 0 ? "wte, wpe" : "";
    if (p + 1 == stages) also += std::string(also.empty() ? "" : "; ") + "ln_f, lm_head";
    t.add_row({std::to_string(p), str("[", r.first, ", ", r.last, ")"), also.empty() ? "-" : also,
               p + 1 == stages ? "the loss stays" : "B/M·T·C floats forward, as many back"});
  }
  t.print(std::cout);
  say.say("chapter 14's head is untied from wte, so the last stage holds its own lm_head; a tied pair would span\n"
          "the first and last stages and need their gradients summed once per step.");
}

}  // namespace dpt::ch15
