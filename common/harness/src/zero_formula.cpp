// zero_formula.cpp — the ZeRO formulas by category (zero_formula.h).
#include "dpt/zero_formula.h"

#include <sstream>

namespace dpt {

StateBytes zero_state_bytes(int stage, const StateBytes& width, double full, double shard) {
  return {width.params * (stage >= 3 ? shard : full), width.grads * (stage >= 2 ? shard : full),
          width.state * (stage >= 1 ? shard : full)};
}

std::string zero_formula_text(int stage, const StateBytes& width) {
  const StateBytes whole = zero_state_bytes(stage, width, 1, 0), divided = zero_state_bytes(stage, width, 0, 1);
  std::ostringstream text;
  if (whole.total() > 0) text << whole.total() << "Ψ";
  if (whole.total() > 0 && divided.total() > 0) text << " + ";
  if (divided.total() > 0) text << divided.total() << "Ψ/N";
  return text.str();
}

}  // namespace dpt
