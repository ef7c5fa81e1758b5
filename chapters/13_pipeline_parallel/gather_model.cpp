// gather_model.cpp — the pipeline's layers put back together on stage 0
// (sections.h): for the step check and for the model the harness scores.
#include "sections.h"

namespace dpt::ch13 {

void gather_model(Communicator& comm, const PipelineStage& stage, MLP& model, bool with_grads,
                  std::vector<float>* weights, std::vector<float>* grads) {
  const std::vector<Tensor> all = model.parameters();
  if (comm.rank() != 0) {
    for (const Tensor& p : stage.parameters()) {
      comm.send(p, 0);
      if (with_grads) comm.send(p.grad(), 0);
    }
    return;
  }
  for (int s = 0; s < comm.size(); ++s) {
    LayerRange range = stage_layers(int(model.layers().size()), comm.size(), s);
    for (int i = 2 * range.first; i < 2 * range.last; ++i) {
      Tensor p = all[std::size_t(i)], g = s == 0 && with_grads ? p.grad() : Tensor::zeros(p.shape(), p.device());
      if (s > 0) comm.recv(p, s);
      if (s > 0 && with_grads) comm.recv(g, s);
      Tensor host_p = p.to(Device::host()), host_g = g.to(Device::host());
      if (weights) weights->insert(weights->end(), host_p.data(), host_p.data() + p.numel());
      if (grads) grads->insert(grads->end(), host_g.data(), host_g.data() + g.numel());
    }
  }
}

}  // namespace dpt::ch13
