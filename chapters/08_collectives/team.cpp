// team.cpp — what chapter 08 provides around the algorithms: a team (part of
// the world, addressed by index), powers of two, and the pairwise
// reduce-scatter and all-gather the two-level all-reduce runs inside a node.
#include "ch08.h"
#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch08 {

// ----------------------------------------------------------------------------
// teams

Team::Team(Communicator& comm) : comm_(comm), index_(comm.rank()) {
  for (int r = 0; r < comm.size(); ++r) members_.push_back(r);
}

Team::Team(Communicator& comm, std::vector<int> members) : comm_(comm), members_(std::move(members)) {
  for (int i = 0; i < size(); ++i) {
    DPT_CHECK(members_[i] >= 0 && members_[i] < comm.size(),
              "Team: member " << i << " is world rank " << members_[i] << ", the world has " << comm.size());
    if (members_[i] == comm.rank()) index_ = i;
  }
  DPT_CHECK(index_ >= 0, "Team: world rank " << comm.rank() << " built a team it is not a member of");
}

int Team::world_rank(int index) const {
  DPT_CHECK(index >= 0 && index < size(), "Team: member " << index << " of a team of " << size());
  return members_[std::size_t(index)];
}

Team Team::sub(const std::vector<int>& indices) const {
  std::vector<int> members;
  for (int i : indices) members.push_back(world_rank(i));
  return Team(comm_, members);
}

void Team::send(const float* data, int64_t count, int to) const { comm_.send(data, count, world_rank(to)); }
void Team::recv(float* data, int64_t count, int from) const { comm_.recv(data, count, world_rank(from)); }
void Team::sendrecv(const float* send_buf, int64_t send_count, int to, float* recv_buf, int64_t recv_count,
                    int from) const {
  comm_.sendrecv(send_buf, send_count, world_rank(to), recv_buf, recv_count, world_rank(from));
}

// ----------------------------------------------------------------------------
// powers of two

int power_of_two_below(int n) {
  DPT_CHECK(n >= 1, "power_of_two_below: n = " << n);
  int p = 1;
  while (2 * p <= n) p *= 2;
  return p;
}

// ----------------------------------------------------------------------------
// pairwise exchange inside a team: n−1 steps, step s pairs member i with
// i+s (to) and i−s (from); every member sends (n−1)/n of the vector. On a
// node where every pair has its own link (a switch), no step waits on a
// shared link, which is why the two-level all-reduce uses it there.

void pairwise_reduce_scatter(const Team& team, float* data, int64_t count) {
  const int n = team.size(), i = team.rank();
  Range mine = block_range(count, n, i, i + 1);
  Floats scratch(data, mine.size());
  for (int s = 1; s < n; ++s) {
    int to = (i + s) % n, from = (i - s + n) % n;
    Range out = block_range(count, n, to, to + 1);
    // Meanwhile member `from` sends us its contribution to our block.
    team.sendrecv(data + out.begin, out.size(), to, scratch.data(), mine.size(), from);
    add_floats(data + mine.begin, scratch.data(), mine.size());
  }
}

void pairwise_all_gather(const Team& team, float* data, int64_t count) {
  const int n = team.size(), i = team.rank();
  Range mine = block_range(count, n, i, i + 1);
  for (int s = 1; s < n; ++s) {
    int to = (i + s) % n, from = (i - s + n) % n;
    Range in = block_range(count, n, from, from + 1);
    team.sendrecv(data + mine.begin, mine.size(), to, data + in.begin, in.size(), from);
  }
}

}  // namespace dpt::ch08
