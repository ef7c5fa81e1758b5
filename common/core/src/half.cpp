// half.cpp — the formats' names (dpt/half.h; the conversions are inline, in
// dpt/half_math.h).
#include "dpt/half.h"

namespace dpt {

const char* half_name(Half format) { return format == Half::BF16 ? "bf16" : "fp16"; }

}  // namespace dpt
