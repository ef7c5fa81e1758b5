// ch07_weights.h — the weights a chapter 07 run saved (--save-weights), as one
// flat vector in parameter order; the file is removed once read.
#pragma once

#include "support/catch.h"
#include <cstdio>
#include <string>
#include <vector>

#include "dpt/checkpoint.h"

namespace dpt_test {

inline std::vector<float> read_flat(const std::string& path) {
  dpt::SafeTensorsFile file = dpt::read_safetensors(path);
  std::vector<float> flat;
  for (const char* name : {"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"}) {
    REQUIRE(file.tensors.count(name) == 1);
    auto v = file.tensors.at(name).floats();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  std::remove(path.c_str());
  return flat;
}

}  // namespace dpt_test
