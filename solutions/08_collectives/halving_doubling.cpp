// solutions/08_collectives/halving_doubling.cpp — Rabenseifner's all-reduce:
// reduce-scatter by recursive halving, all-gather by recursive doubling, and
// the fold that lets any number of ranks use it (spec: ch08.h).
//
// Halving: the partner is p/2 away first, then p/4, … 1 (r XOR distance);
// the lower of the two keeps the lower half of the blocks both still hold.
// Doubling retraces the same pairs in reverse, each time sending all it holds
// final. Every member sends (p−1)/p of the vector in each phase, in log2 p
// messages:  T = 2·log2 p·α + 2(p−1)/p·S·β   (+ 2(α + S·β) for the fold).
#include <algorithm>

#include "ch08.h"
#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch08 {

void halving_reduce_scatter(const Team& team, float* data, int64_t count) {
  const int p = team.size(), r = team.rank();
  DPT_CHECK(power_of_two_below(p) == p, "halving_reduce_scatter needs a power-of-two team, got " << p);
  int lo = 0, hi = p;  // the blocks this member still reduces
  Floats scratch(data, block_range(count, p, 0, p / 2).size());  // the lower half is the larger
  for (int distance = p / 2; distance >= 1; distance /= 2) {
    int partner = r ^ distance, mid = (lo + hi) / 2;
    bool keep_lower = r < partner;
    Range keep = keep_lower ? block_range(count, p, lo, mid) : block_range(count, p, mid, hi);
    Range give = keep_lower ? block_range(count, p, mid, hi) : block_range(count, p, lo, mid);
    // The partner holds the same blocks [lo, hi) and keeps the half we give.
    team.sendrecv(data + give.begin, give.size(), partner, scratch.data(), keep.size(), partner);
    add_floats(data + keep.begin, scratch.data(), keep.size());
    (keep_lower ? hi : lo) = mid;
  }
}

void doubling_all_gather(const Team& team, float* data, int64_t count) {
  const int p = team.size(), r = team.rank();
  DPT_CHECK(power_of_two_below(p) == p, "doubling_all_gather needs a power-of-two team, got " << p);
  int lo = r, held = 1;  // blocks [lo, lo + held) are final here
  for (int distance = 1; distance < p; distance *= 2) {
    int partner = r ^ distance, partner_lo = lo ^ distance;  // its final blocks sit next to ours
    Range mine = block_range(count, p, lo, lo + held), theirs = block_range(count, p, partner_lo, partner_lo + held);
    team.sendrecv(data + mine.begin, mine.size(), partner, data + theirs.begin, theirs.size(), partner);
    lo = std::min(lo, partner_lo);
    held *= 2;
  }
}

void halving_doubling_all_reduce(const Team& team, float* data, int64_t count) {
  const int n = team.size(), r = team.rank(), p = power_of_two_below(n);
  if (r >= p) {  // an extra member: member r − p sums for it
    team.send(data, count, r - p);
    team.recv(data, count, r - p);
    return;
  }
  bool hosts_extra = r + p < n;
  if (hosts_extra) {
    Floats scratch(data, count);
    team.recv(scratch.data(), count, r + p);
    add_floats(data, scratch.data(), count);
  }
  std::vector<int> first(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) first[std::size_t(i)] = i;
  Team core = team.sub(first);
  halving_reduce_scatter(core, data, count);
  doubling_all_gather(core, data, count);
  if (hosts_extra) team.send(data, count, r + p);
}

}  // namespace dpt::ch08
