// ch05_words.h — how chapter 05's tests write a bucket layout and a list in
// their messages: a layout as parameter indices per bucket, a list as "a, b, c".
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace dpt_test {

/// A bucket layout as the tests write it: bucket → parameter indices.
using Layout = std::vector<std::vector<int>>;

/// `values` as "v0, v1, …", for messages.
template <typename T>
std::string listed(const std::vector<T>& values) {
  std::ostringstream out;
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  return out.str();
}

}  // namespace dpt_test
