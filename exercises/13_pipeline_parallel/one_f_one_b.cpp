// exercises/13_pipeline_parallel/one_f_one_b.cpp — hole: the 1F1B schedule of
// one stage. The contract is dpt::ch13::one_f_one_b in
// chapters/13_pipeline_parallel/ch13.h; hints in tiers are in
// docs/ch13_pipeline_parallel.md (§ Hints).
//
// Pointers:
//   - ch13.h: Op{Pass::Forward, m} is "F m"; gpipe() in
//     chapters/13_pipeline_parallel/schedule.cpp is a schedule written out.
//   - `ch13_pipeline_parallel --ranks 4` prints every stage's schedule and
//     draws them (--gantt FILE.svg).
#include "ch13.h"

#include "dpt/check.h"

namespace dpt::ch13 {

std::vector<Op> one_f_one_b(int stage, int stages, int micro_batches) {
  (void)stage, (void)stages, (void)micro_batches;
  throw NotImplemented("ch13: one_f_one_b — see exercises/13_pipeline_parallel/one_f_one_b.cpp");
}

}  // namespace dpt::ch13
