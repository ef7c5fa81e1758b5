// recursive_doubling.cpp — all-reduce by recursive doubling: the
// latency-optimal algorithm for small vectors.
//
// log2 p steps; in step k every rank swaps its *whole* partial sum with a
// partner 2^k away in the power-of-two numbering and adds what it gets, so
// after step k each rank holds the sum over a group of 2^(k+1) ranks:
//   T = log2 p · (α + S·β)         (+ 2(α + S·β) for the fold when n ≠ p)
// Few messages, but every one is the whole vector: for large S the halving
// and doubling of Rabenseifner's algorithm sends far less.
//
// Non-powers of two (MPICH's fold): with rem = n − p, the first 2·rem ranks
// pair up (0,1), (2,3), …; the even one sends its vector to the odd one and
// sits out, the odd one takes part as "new rank" r/2; the ranks from 2·rem on
// take part as r − rem. At the end each odd rank hands the sum back.
#include "ch08.h"
#include "dpt/floats.h"

namespace dpt::ch08 {

void recursive_doubling_all_reduce(const Team& team, float* data, int64_t count) {
  const int n = team.size(), r = team.rank(), p = power_of_two_below(n), rem = n - p;
  Floats scratch(data, count);
  // ---- fold in: even ranks below 2·rem give their vector to the odd one above
  int new_rank;
  if (r < 2 * rem && r % 2 == 0) {
    team.send(data, count, r + 1);
    new_rank = -1;  // sits out until the fold out
  } else if (r < 2 * rem) {
    team.recv(scratch.data(), count, r - 1);
    add_floats(data, scratch.data(), count);
    new_rank = r / 2;
  } else {
    new_rank = r - rem;
  }
  // ---- log2 p steps among the p taking part: swap whole vectors, add
  if (new_rank >= 0) {
    for (int distance = 1; distance < p; distance *= 2) {
      int new_partner = new_rank ^ distance;
      int partner = new_partner < rem ? 2 * new_partner + 1 : new_partner + rem;  // back to a team index
      // The partner does the same step with us: both send all they have.
      team.sendrecv(data, count, partner, scratch.data(), count, partner);
      add_floats(data, scratch.data(), count);
    }
  }
  // ---- fold out: the odd ranks hand the sum back
  if (r < 2 * rem) {
    if (r % 2 == 0) team.recv(data, count, r + 1);
    else team.send(data, count, r - 1);
  }
}

}  // namespace dpt::ch08
