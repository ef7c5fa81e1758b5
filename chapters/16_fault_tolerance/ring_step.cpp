// ring_step.cpp — the ring all-reduce of --ring (ring_step.h).
#include "ring_step.h"

#include <cstdint>

namespace dpt::ch16 {

bool ring_all_reduce(Communicator& comm, std::vector<float>& data, bool die_in_last_hop) {
  const int n = comm.size(), me = comm.rank();
  if (n == 1) return !die_in_last_hop;
  const int64_t count = int64_t(data.size());
  auto begin = [&](int c) { return c * count / n; };
  auto size = [&](int c) { return begin(c + 1) - begin(c); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  const int right = mod(me + 1), left = mod(me - 1);
  std::vector<float> incoming(std::size_t(count / n + 1));
  for (int k = 0; k < n - 1; ++k) {  // scatter-reduce: after it, this rank holds chunk me + 1 summed
    const int out = mod(me - k), in = mod(me - k - 1);
    comm.sendrecv(data.data() + begin(out), size(out), right, incoming.data(), size(in), left, 21);
    for (int64_t i = 0; i < size(in); ++i) data[std::size_t(begin(in) + i)] += incoming[std::size_t(i)];
  }
  for (int k = 0; k < n - 1; ++k) {  // all-gather: pass the summed chunks on
    const int out = mod(me + 1 - k), in = mod(me - k);
    if (die_in_last_hop && k == n - 2) {
      comm.send(data.data() + begin(out), size(out), right, 22);
      return false;
    }
    comm.sendrecv(data.data() + begin(out), size(out), right, data.data() + begin(in), size(in), left, 22);
  }
  return true;
}

}  // namespace dpt::ch16
