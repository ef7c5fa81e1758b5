// solutions/11_mixed_precision/recompute.cpp — backward by segments, last
// first: make the checkpoint a leaf that wants a gradient, recompute the
// segment with the graph on, and backpropagate the gradient its output
// received (backward(out, dout)), then pass the checkpoint's gradient down to
// the segment before.
#include "ch11.h"

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch11 {

void recompute_backward(std::vector<Tensor>& checkpoints, const SegmentForward& forward, const LossOf& loss_of) {
  DPT_CHECK(!checkpoints.empty(), "recompute_backward: no segments");
  Tensor dout;  // d(loss)/d(output of segment k), from segment k+1
  for (std::size_t k = checkpoints.size(); k-- > 0;) {
    Tensor in = checkpoints[k];
    checkpoints[k] = Tensor();               // alive only as long as `in`, this segment
    if (k > 0) in.set_requires_grad(true);   // a leaf: its gradient is the previous segment's dout
    Tensor out = forward(k, in);
    if (k + 1 == checkpoints.size())
      backward(loss_of(out));
    else
      backward(out, dout);
    if (k > 0) dout = in.grad();
  }
}

}  // namespace dpt::ch11
