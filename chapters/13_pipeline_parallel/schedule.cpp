// schedule.cpp — GPipe's schedule, the worked example beside 1F1B (ch13.h),
// and how schedules print.
#include "ch13.h"

#include "dpt/check.h"

namespace dpt::ch13 {

std::string op_name(const Op& op) {
  return (op.pass == Pass::Forward ? "F" : "B") + std::to_string(op.micro_batch);
}

std::string schedule_text(const std::vector<Op>& ops) {
  std::string text;
  for (const Op& op : ops) text += (text.empty() ? "" : " ") + op_name(op);
  return text;
}

std::vector<Op> gpipe(int stage, int stages, int micro_batches) {
  DPT_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
            "gpipe: stage " << stage << " of " << stages << " with " << micro_batches << " micro-batches");
  std::vector<Op> ops;
  for (int m = 0; m < micro_batches; ++m) ops.push_back({Pass::Forward, m});
  for (int m = 0; m < micro_batches; ++m) ops.push_back({Pass::Backward, m});
  return ops;
}

}  // namespace dpt::ch13
