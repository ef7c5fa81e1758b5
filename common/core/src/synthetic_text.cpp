// synthetic_text.cpp — a seeded rule over eight letters, two back (see synthetic_text.h).
#include "dpt/synthetic_text.h"

#include <cmath>

#include "dpt/check.h"
#include "dpt/nn.h"

namespace dpt {

namespace {
constexpr int kLetters = 8;
// J's distribution: the probabilities of the four steps, as counts out of 8.
constexpr int kEighths[4] = {4, 2, 1, 1};
}  // namespace

std::string make_synthetic_text(int64_t characters, uint64_t seed) {
  DPT_CHECK(characters >= 0, "synthetic text of " << characters << " characters");
  Rng rng(seed);
  int step[4];  // four distinct steps mod 8, from the seed
  for (int j = 0; j < 4; ++j) {
    bool taken;
    do {
      step[j] = int(rng.below(kLetters));
      taken = false;
      for (int k = 0; k < j; ++k) taken = taken || step[k] == step[j];
    } while (taken);
  }
  std::string text(std::size_t(characters), ' ');
  int before = 0, last = 0;  // x[t−2], x[t−1]
  for (int64_t t = 0; t < characters; ++t) {
    int x;
    if (t < 2) {
      x = int(rng.below(kLetters));
    } else {
      int eighth = int(rng.below(8)), j = 0;  // J = j with probability kEighths[j]/8
      for (int below = kEighths[0]; eighth >= below; below += kEighths[++j]) {}
      x = (before + step[j]) % kLetters;
    }
    text[std::size_t(t)] = kSyntheticAlphabet[x];
    before = last;
    last = x;
  }
  return text;
}

double synthetic_entropy_nats() {
  double h = 0;
  for (int eighths : kEighths) h -= eighths / 8.0 * std::log(eighths / 8.0);
  return h;
}

}  // namespace dpt
