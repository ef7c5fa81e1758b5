// solutions/16_fault_tolerance/samples.cpp — which samples each member
// computes at a step (contract: dpt::ch16::assign_samples in ch16.h).
#include "ch16.h"

#include "elastic_rank.h"

namespace dpt::ch16 {

StepSamples assign_samples(int64_t cursor, int members, int64_t global, int64_t samples, uint64_t seed) {
  StepSamples out;
  out.shards.resize(std::size_t(members));
  // The step owns the next `global` positions of the stream, whoever computes
  // them: cut them into `members` contiguous pieces, the remainder spread one
  // by one, so that nothing falls between two members.
  for (int i = 0; i < members; ++i) {
    const int64_t lo = i * global / members, hi = (i + 1) * global / members;
    for (int64_t p = lo; p < hi; ++p) out.shards[std::size_t(i)].push_back(sample_at(cursor + p, samples, seed));
  }
  out.next_cursor = cursor + global;  // the stream moves by what the step consumed, not by a member's share
  return out;
}

}  // namespace dpt::ch16
