// solutions/13_pipeline_parallel/run_schedule.cpp — each op receives its
// input and, after computing, has one result to hand on. Sending that result
// and then receiving the next op's input, each call on its own, deadlocks
// once sends wait for their receives: in 1F1B's steady state stage s sends
// F m's activation up while stage s+1 sends B k's gradient down, and each
// waits for the other to receive. So the result of one op travels in the
// same sendrecv as the next op's input, both in progress at once.
#include "ch13.h"

namespace dpt::ch13 {

void run_schedule(Communicator& comm, const std::vector<Op>& ops, const StageWork& work) {
  const int s = comm.rank(), last = comm.size() - 1;
  Tensor pending;   // the previous op's result, not yet sent
  int pending_to = -1;
  for (const Op& op : ops) {
    const bool forward = op.pass == Pass::Forward;
    // Where this op's input comes from: F from the stage before, B from the one after.
    const int from = forward ? (s > 0 ? s - 1 : -1) : (s < last ? s + 1 : -1);
    Tensor input;
    if (from >= 0) input = forward ? work.input_buffer(op.micro_batch) : work.output_grad_buffer(op.micro_batch);
    if (pending_to >= 0 && from >= 0)
      comm.sendrecv(pending, pending_to, input, from);
    else if (pending_to >= 0)
      comm.send(pending, pending_to);
    else if (from >= 0)
      comm.recv(input, from);
    pending = forward ? work.forward(op.micro_batch, input) : work.backward(op.micro_batch, input);
    // Where the result goes: F's activation up, B's input gradient down.
    pending_to = forward ? (s < last ? s + 1 : -1) : (s > 0 ? s - 1 : -1);
  }
  if (pending_to >= 0) comm.send(pending, pending_to);
}

}  // namespace dpt::ch13
