// replica.cpp — momentum SGD on a flat replica (ch16.h's apply_momentum,
// provided): what a committed step does to one member.
#include <cstddef>

#include "ch16.h"

namespace dpt::ch16 {

void apply_momentum(Replica& replica, const std::vector<float>& grad, float lr) {
  for (std::size_t i = 0; i < replica.params.size(); ++i) {
    replica.momentum[i] = 0.9f * replica.momentum[i] + grad[i];
    replica.params[i] -= lr * replica.momentum[i];
  }
}

}  // namespace dpt::ch16
