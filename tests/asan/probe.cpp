// probe.cpp — a planted mistake for the ASan preset: reads one float past a
// tensor's end, or through a freed tensor's pointer. The device allocator
// rounds blocks up to 64 bytes and keeps freed ones, so without its
// poisoning (device.cpp) both reads land in memory it owns and AddressSanitizer
// says nothing; with it, each is a "use-after-poison" report naming the read.
//
//   asan_probe past-end | freed
#include <cstdio>
#include <cstring>

#include "dpt/device.h"
#include "dpt/tensor.h"

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "past-end") != 0 && std::strcmp(argv[1], "freed") != 0)) {
    std::fprintf(stderr, "usage: asan_probe past-end|freed\n");
    return 2;
  }
  const int64_t n = 1001;  // 4004 bytes: a 4032-byte block, 28 bytes of slack
  volatile float sink = 0;
  if (std::strcmp(argv[1], "past-end") == 0) {
    dpt::Tensor t = dpt::Tensor::zeros({n}, dpt::Device::cpu(0));
    sink = t.data()[n];  // one past the end
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
