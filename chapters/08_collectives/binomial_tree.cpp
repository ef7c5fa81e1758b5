// binomial_tree.cpp — all-reduce as a binomial-tree reduce to rank 0 followed
// by a binomial-tree broadcast from it.
//
// Reduce: in step k (distance 2^k) every rank whose index is an odd multiple
// of 2^k sends its partial sum to index − 2^k and drops out; the receiver adds.
// After ceil(log2 n) steps rank 0 holds the sum. The broadcast runs the same
// tree backwards. Whole vectors at every step, and half the ranks idle in each:
//   T = 2·ceil(log2 n) · (α + S·β)
// The shape MPI libraries use for small reduces and broadcasts, and the one
// NCCL's tree algorithm pipelines in chunks.
#include "ch08.h"
#include "dpt/floats.h"

namespace dpt::ch08 {

void tree_all_reduce(const Team& team, float* data, int64_t count) {
  const int n = team.size(), r = team.rank();
  Floats scratch(data, count);
  // ---- reduce to rank 0: listen to children 2^k away until it is our turn to send
  int distance = 1;
  for (; distance < n; distance *= 2) {
    if (r % (2 * distance) != 0) {  // lowest set bit of r: send to the parent, done
      team.send(data, count, r - distance);
      break;
    }
    if (r + distance < n) {  // a child at this distance exists: it sends its subtree's sum
      team.recv(scratch.data(), count, r + distance);
      add_floats(data, scratch.data(), count);
    }
  }
  // ---- broadcast from rank 0: the same tree, backwards (receive from the
  // parent, then send to the children at smaller distances)
  if (r != 0) team.recv(data, count, r - distance);
  for (distance /= 2; distance >= 1; distance /= 2)
    if (r % (2 * distance) == 0 && r + distance < n) team.send(data, count, r + distance);
}

}  // namespace dpt::ch08
