// test_memory_ledger.cpp — memory by category: scopes tag allocations, a free
// is charged back to the category that allocated (whoever frees it), the
// peak's composition is the one at the highest total, and the categories add
// up to the device's own count.
#include "support/catch.h"
#include <thread>

#include "dpt/device.h"
#include "dpt/memory_ledger.h"
#include "dpt/tensor.h"

using namespace dpt;

TEST_CASE("memory ledger: scopes nest, and a free goes back to the allocating category", "[core][memory]") {
  Device& dev = Device::cpu(71);
  dev.reset_peak();
  const MemoryLedger& ledger = dev.ledger();
  CHECK(current_memory_category() == MemoryCategory::Other);
  Tensor params, grads, scratch;
  {
    MemoryScope outer(MemoryCategory::Params);
    params = Tensor::zeros({100}, dev);  // 400 bytes
    {
      MemoryScope inner(MemoryCategory::Grads);
      grads = Tensor::zeros({50}, dev);  // 200 bytes
    }
    CHECK(current_memory_category() == MemoryCategory::Params);
  }
  CHECK(current_memory_category() == MemoryCategory::Other);
  CHECK(ledger.current(MemoryCategory::Params) == 400);
  CHECK(ledger.current(MemoryCategory::Grads) == 200);
  {
    MemoryScope other(MemoryCategory::Comm);
    grads = Tensor();  // freed under another scope: still returned to gradients
  }
  CHECK(ledger.current(MemoryCategory::Grads) == 0);
  CHECK(ledger.current(MemoryCategory::Comm) == 0);
  CHECK(ledger.peak(MemoryCategory::Grads) == 200);
  // The peak's composition: at 600 bytes it held 400 of parameters and 200 of gradients.
  CHECK(ledger.peak_total() == 600);
  CHECK(ledger.at_peak(MemoryCategory::Params) == 400);
  CHECK(ledger.at_peak(MemoryCategory::Grads) == 200);
  // A smaller high later does not replace the composition.
  {
    MemoryScope comm(MemoryCategory::Comm);
    scratch = Tensor::zeros({25}, dev);  // 100 bytes: total 500 < 600
  }
  CHECK(ledger.at_peak(MemoryCategory::Comm) == 0);
  CHECK(ledger.current(MemoryCategory::Comm) == 100);
  std::size_t sum = 0;
  for (int c = 0; c < kMemoryCategories; ++c) sum += ledger.current(MemoryCategory(c));
  CHECK(sum == dev.current_bytes());  // the ledger is the device's count, split
  dev.reset_peak();
  CHECK(ledger.peak_total() == 500);
  CHECK(ledger.peak(MemoryCategory::Grads) == 0);
}

TEST_CASE("memory ledger: the category is per thread", "[core][memory]") {
  Device& dev = Device::cpu(72);
  MemoryScope here(MemoryCategory::OptimizerState);
  Tensor from_thread;
  std::thread other([&] { from_thread = Tensor::zeros({10}, dev); });  // no scope on that thread: Other
  other.join();
  CHECK(dev.ledger().current(MemoryCategory::Other) == 40);
  CHECK(dev.ledger().current(MemoryCategory::OptimizerState) == 0);
  CHECK(std::string(memory_category_name(MemoryCategory::OptimizerState)) == "optimizer state");
}

TEST_CASE("out of memory names the category being allocated", "[core][memory]") {
  Device& dev = Device::cpu(73);
  dev.set_capacity(64);
  MemoryScope scope(MemoryCategory::Activations);
  CHECK_THROWS_WITH(Tensor::zeros({100}, dev), contains_text("while allocating activations"));
  dev.set_capacity(0);
}
