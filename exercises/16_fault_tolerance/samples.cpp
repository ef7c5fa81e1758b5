// exercises/16_fault_tolerance/samples.cpp — hole: which samples each member
// of a quorum computes at a step, so that no sample of an epoch is lost or
// seen twice across shrinks and joins. The contract is
// dpt::ch16::assign_samples in chapters/16_fault_tolerance/ch16.h; hints in
// tiers are in docs/ch16_fault_tolerance.md (§ Hints).
#include "ch16.h"

#include "dpt/check.h"
#include "elastic_rank.h"

namespace dpt::ch16 {

StepSamples assign_samples(int64_t cursor, int members, int64_t global, int64_t samples, uint64_t seed) {
  (void)cursor, (void)members, (void)global, (void)samples, (void)seed;
  throw NotImplemented("ch16: assign_samples — see exercises/16_fault_tolerance/samples.cpp");
}

}  // namespace dpt::ch16
