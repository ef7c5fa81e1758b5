// autograd.cpp — topological sort, the backward sweep, grad-ready hooks.
#include "dpt/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt {

namespace {
thread_local bool t_grad_enabled = true;

bool is_leaf(const TensorImpl* t) { return t->requires_grad && !t->grad_fn; }

// Post-order DFS: every tensor appears after all the tensors it was computed
// from, so walking the list backwards visits consumers before producers.
// Holds shared pointers: freeing a node during the sweep must not free a
// tensor that is still to be visited.
void topo_sort(const Tensor& root, std::vector<std::shared_ptr<TensorImpl>>& order) {
  std::unordered_set<TensorImpl*> seen;
  // Explicit stack (a deep MLP must not overflow the call stack).
  std::vector<std::pair<std::shared_ptr<TensorImpl>, std::size_t>> stack{{root.impl(), 0}};
  seen.insert(root.impl().get());
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    if (t->grad_fn && next < t->grad_fn->inputs.size()) {
      std::shared_ptr<TensorImpl> in = t->grad_fn->inputs[next++].impl();
      if (in && seen.insert(in.get()).second) stack.push_back({std::move(in), 0});
    } else {
      order.push_back(std::move(t));
      stack.pop_back();
    }
  }
}

// Adds g into a gradient slot. A leaf's gradient must own its storage (an
// in-place all-reduce on one parameter's gradient must not change another's),
// so a gradient still shared with others (add() hands one dout to both
// inputs) is copied; a freshly computed one is taken without a copy.
void accumulate(std::shared_ptr<TensorImpl>& slot, const Tensor& g, bool leaf) {
  if (!slot) {
    slot = (leaf && g.impl().use_count() > 1) ? g.clone().impl() : g.impl();
    return;
  }
  bool shared = slot.use_count() > 1;  // never write into storage someone else holds
  Tensor acc = shared ? Tensor(slot).clone() : Tensor(slot);
  axpy_(acc, 1.0f, g);
  slot = acc.impl();
}
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

std::vector<bool> reaches(const Tensor& loss, const std::vector<Tensor>& leaves) {
  DPT_CHECK(loss.defined(), "reaches(): the loss is an undefined tensor");
  std::vector<std::shared_ptr<TensorImpl>> order;
  topo_sort(loss, order);
  std::unordered_set<const TensorImpl*> in_graph;
  for (const auto& t : order) in_graph.insert(t.get());
  std::vector<bool> reached;
  for (const Tensor& leaf : leaves) reached.push_back(leaf.defined() && in_graph.count(leaf.impl().get()) > 0);
  return reached;
}

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

Tensor record(Tensor output, const char* op, std::vector<Tensor> inputs,
              std::function<std::vector<Tensor>(const Tensor& dout)> backward) {
  if (!t_grad_enabled) return output;
  bool any = false;
  for (const Tensor& in : inputs) any = any || in.requires_grad();
  if (!any) return output;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  output.impl()->grad_fn = std::move(node);
  output.impl()->requires_grad = true;
  return output;
}

namespace {
// The sweep from `loss`, whose own gradient is `seed` (its shape, its device).
void sweep(const Tensor& loss, const Tensor& seed) {
  NoGradGuard no_grad;  // gradient arithmetic is not itself recorded

  std::vector<std::shared_ptr<TensorImpl>> order;
  topo_sort(loss, order);

  // How many nodes still have to deliver a gradient to each leaf; at zero the
  // leaf's gradient is final and its hooks fire.
  std::unordered_map<TensorImpl*, int> pending;
  for (auto& t : order)
    if (t->grad_fn)
      for (const Tensor& in : t->grad_fn->inputs)
        if (in.defined() && is_leaf(in.impl().get())) ++pending[in.impl().get()];

  std::unordered_map<TensorImpl*, std::shared_ptr<TensorImpl>> grads;  // non-leaf gradients
  grads[loss.impl().get()] = seed.impl();

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* t = it->get();
    if (!t->grad_fn) continue;
    auto found = grads.find(t);
    std::shared_ptr<Node> node = t->grad_fn;
    t->grad_fn.reset();  // free the graph as we go
    if (found != grads.end()) {
      Tensor dout(found->second);
      grads.erase(found);  // this tensor's gradient is consumed: free it
      std::vector<Tensor> dinputs = node->backward(dout);
      DPT_CHECK(dinputs.size() == node->inputs.size(),
                node->op << " backward returned " << dinputs.size() << " gradients for "
                         << node->inputs.size() << " inputs");
      for (std::size_t i = 0; i < dinputs.size(); ++i) {
        Tensor& in = node->inputs[i];
        if (!dinputs[i].defined() || !in.requires_grad()) continue;
        DPT_CHECK(dinputs[i].shape() == in.shape(),
                  node->op << " backward: gradient " << shape_str(dinputs[i].shape())
                           << " for input " << i << " of shape " << shape_str(in.shape()));
        bool leaf = is_leaf(in.impl().get());
        accumulate(leaf ? in.impl()->grad : grads[in.impl().get()], dinputs[i], leaf);
      }
    }
    for (Tensor& in : node->inputs) {
      if (!in.defined() || !is_leaf(in.impl().get())) continue;
      if (--pending[in.impl().get()] == 0)
        for (auto& hook : in.impl()->grad_ready_hooks) hook(in);
    }
  }
}

}  // namespace

void backward(const Tensor& loss) {
  DPT_CHECK(loss.defined() && loss.numel() == 1,
            "backward() starts from a one-element loss, got shape "
                << (loss.defined() ? shape_str(loss.shape()) : "undefined")
                << " (for a non-scalar output, pass its gradient: backward(output, output_gradient))");
  DPT_CHECK(loss.requires_grad(), "backward(): the loss does not depend on any tensor that requires grad");
  sweep(loss, Tensor::full(loss.shape(), 1.0f, loss.device()));
}

void backward(const Tensor& output, const Tensor& output_gradient) {
  DPT_CHECK(output.defined() && output_gradient.defined(),
            "backward(output, output_gradient): " << (output.defined() ? "the gradient" : "the output")
                                                  << " is an undefined tensor");
  DPT_CHECK(output_gradient.shape() == output.shape(),
            "backward(output, output_gradient): the gradient must have the output's shape "
                << shape_str(output.shape()) << ", got " << shape_str(output_gradient.shape()));
  DPT_CHECK(&output_gradient.device() == &output.device(),
            "backward(output, output_gradient): the gradient must be on the output's device "
                << output.device().name() << ", got " << output_gradient.device().name());
  DPT_CHECK(output.requires_grad(),
            "backward(output, output_gradient): the output does not depend on any tensor that requires grad");
  sweep(output, output_gradient);  // shared storage is never written: accumulate() copies it first
}

}  // namespace dpt
