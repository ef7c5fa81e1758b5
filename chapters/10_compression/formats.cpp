// formats.cpp — the 16-bit formats on the wire (formats.h); the conversions
// themselves are the core's (dpt/half.h).
#include "formats.h"

#include <cmath>
#include <cstring>

namespace dpt::ch10 {

std::vector<float> pack(const std::vector<uint16_t>& halves) {
  std::vector<float> words((halves.size() + 1) / 2);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const uint32_t low = halves[2 * i], high = 2 * i + 1 < halves.size() ? halves[2 * i + 1] : 0;
    words[i] = word_of(low | (high << 16));
  }
  return words;
}

std::vector<uint16_t> unpack(const std::vector<float>& words, int64_t count) {
  std::vector<uint16_t> halves(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) halves[std::size_t(i)] = uint16_t(bits_of(words[std::size_t(i / 2)]) >> (16 * (i % 2)));
  return halves;
}

}  // namespace dpt::ch10
