// test_floats.cpp — dpt/floats.h on host memory against plain loops (the GPU
// side is in tests/gpu/test_gpu_floats.cpp).
#include <cmath>
#include <vector>

#include "dpt/device.h"
#include "dpt/floats.h"
#include "dpt/tensor.h"
#include "support/catch.h"
#include "support/ranks.h"

using namespace dpt;

TEST_CASE("host memory is gpu -1, also for a cpu:k tensor and a null pointer", "[floats]") {
  std::vector<float> v(4);
  CHECK(gpu_of(v.data()) == -1);
  Tensor t = Tensor::zeros({3}, Device::cpu(1));
  CHECK(gpu_of(t.data()) == -1);
  CHECK(gpu_of(nullptr) == -1);
}

TEST_CASE("add_floats, scale_floats and divide_floats on host memory equal their loops", "[floats]") {
  std::vector<float> a(1000), b(1000);
  for (int i = 0; i < 1000; ++i) a[std::size_t(i)] = 0.1f * float(i) - 7.3f, b[std::size_t(i)] = std::sin(float(i));
  std::vector<float> want = a, got = a;
  for (std::size_t i = 0; i < 1000; ++i) want[i] += b[i];
  add_floats(got.data(), b.data(), 1000);
  CHECK(got == want);
  for (std::size_t i = 0; i < 1000; ++i) want[i] *= 0.25f;
  scale_floats(got.data(), 1000, 0.25f);
  CHECK(got == want);
  for (std::size_t i = 0; i < 1000; ++i) want[i] /= 3.0f;
  divide_floats(got.data(), 1000, 3.0f);
  CHECK(got == want);
  // a part of a buffer, and nothing past it
  add_floats(got.data() + 10, b.data(), 5);
  for (std::size_t i = 10; i < 15; ++i) want[i] += b[i - 10];
  CHECK(got == want);
}

TEST_CASE("copy_floats copies exactly count floats, and 0 touches nothing", "[floats]") {
  std::vector<float> src = {1, 2, 3, 4}, dst = {9, 9, 9, 9};
  copy_floats(dst.data(), src.data(), 3);
  CHECK(dst == std::vector<float>{1, 2, 3, 9});
  copy_floats(nullptr, nullptr, 0);
}

TEST_CASE("Floats is scratch in the memory of the buffer it is made next to", "[floats]") {
  std::vector<float> v(8);
  Floats next_to_host(v.data(), 5);
  CHECK(next_to_host.size() == 5);
  CHECK(next_to_host.gpu() == -1);
  REQUIRE(next_to_host.data() != nullptr);
  for (int i = 0; i < 5; ++i) next_to_host.data()[i] = float(i);  // writable, 5 floats
  CHECK(next_to_host.data()[4] == 4.0f);
  Floats empty(v.data(), 0);
  CHECK(empty.data() == nullptr);
  CHECK_THROWS_WITH(Floats(-1, -3), contains_text("negative count"));
}

TEST_CASE("in the student build a receive past a dpt::Floats' end is a sentence, not heap corruption", "[floats]") {
  if (!float_ranges_checked()) {
    WARN("skipped: only the student build (DPT_STUDENT=ON) checks float ranges");
    return;
  }
  // Scratch sized for 2 floats, a receive of 3 into it (a chunk larger than the scratch's chunk):
  // the communicator refuses before any byte moves, on both ranks.
  CHECK_THROWS_WITH(dpt_test::run_ranks(2,
                                        [](Context& ctx) {
                                          std::vector<float> out(3, 1.0f);
                                          Floats scratch(out.data(), 2);
                                          int peer = 1 - ctx.rank;
                                          ctx.comm.sendrecv(out.data(), 3, peer, scratch.data(), 3, peer);
                                        }),
                    contains_text("sendrecv: out of bounds: its receive buffer is floats [0, 3) of a dpt::Floats "
                                  "of 2 floats"));
  Floats scratch(-1, 2);
  CHECK_THROWS_WITH(add_floats(scratch.data(), scratch.data(), 3), contains_text("add_floats: out of bounds"));
  CHECK_NOTHROW(add_floats(scratch.data(), scratch.data(), 2));
}
