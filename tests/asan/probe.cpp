// probe.cpp — planted mistakes for the ASan preset, each a read of memory the
// program owns but no one should read:
//   past-end       one float past a tensor's end (the device allocator rounds
//                  blocks up to 64 bytes),
//   freed          through a freed tensor's pointer (the allocator keeps the
//                  block for reuse),
//   vector-slack   past a std::vector's size() but within its capacity() (a
//                  scratch vector reused smaller).
// Without the allocator's poisoning (device.cpp) and _GLIBCXX_SANITIZE_VECTOR
// (the asan preset), AddressSanitizer says nothing of any of them; with them,
// each is a report naming the read.
//
//   asan_probe past-end | freed | vector-slack
#include <cstdio>
#include <cstring>
#include <vector>

#include "dpt/device.h"
#include "dpt/tensor.h"

int main(int argc, char** argv) {
  const char* mode = argc == 2 ? argv[1] : "";
  if (std::strcmp(mode, "past-end") != 0 && std::strcmp(mode, "freed") != 0 && std::strcmp(mode, "vector-slack") != 0) {
    std::fprintf(stderr, "usage: asan_probe past-end|freed|vector-slack\n");
    return 2;
  }
  const int64_t n = 1001;  // 4004 bytes: a 4032-byte block, 28 bytes of slack
  volatile float sink = 0;
  if (std::strcmp(mode, "past-end") == 0) {
    dpt::Tensor t = dpt::Tensor::zeros({n}, dpt::Device::cpu(0));
    sink = t.data()[n];  // one past the end
  } else if (std::strcmp(mode, "vector-slack") == 0) {
    std::vector<float> scratch(4096);
    scratch.resize(std::size_t(n));  // capacity stays 4096
    sink = scratch.data()[n];        // past size(), within capacity()
  } else {
    const float* stale = nullptr;
    {
      dpt::Tensor t = dpt::Tensor::zeros({n}, dpt::Device::cpu(0));
      stale = t.data();
    }  // back to the device's cache, not to the OS
    sink = stale[0];
  }
  std::printf("read %g and nothing was reported\n", double(sink));
  return 0;
}
