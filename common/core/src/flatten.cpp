// flatten.cpp — tensors packed back to back into one buffer and unpacked
// again (flatten.h), with device copies only (copy_bytes, device.h).
#include "dpt/flatten.h"

#include "dpt/check.h"
#include "dpt/memory_ledger.h"

namespace dpt {

namespace {
int64_t total_numel(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  return total;
}

// dst[0, Σ numel) on device `to` = the tensors back to back.
void pack(const std::vector<Tensor>& tensors, float* dst, Device& to) {
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    copy_bytes(dst + offset, to, t.data(), t.device(), t.nbytes());
    offset += t.numel();
  }
}

// The tensors = consecutive slices of src[0, Σ numel) on device `from`.
void unpack(const float* src, Device& from, std::vector<Tensor>& tensors) {
  int64_t offset = 0;
  for (Tensor& t : tensors) {
    copy_bytes(t.data(), t.device(), src + offset, from, t.nbytes());
    offset += t.numel();
  }
}
}  // namespace

std::vector<float> flatten(const std::vector<Tensor>& tensors) {
  std::vector<float> flat(static_cast<std::size_t>(total_numel(tensors)));
  pack(tensors, flat.data(), Device::host());
  return flat;
}

void unflatten(const std::vector<float>& flat, std::vector<Tensor>& tensors) {
  int64_t total = total_numel(tensors);
  DPT_CHECK(total == int64_t(flat.size()), "unflatten: " << flat.size() << " floats for tensors of " << total);
  unpack(flat.data(), Device::host(), tensors);
}

Tensor flatten_on(const std::vector<Tensor>& tensors, Device& device) {
  Tensor flat;
  {
    MemoryScope scope(MemoryCategory::Comm);  // a payload to send: a communication buffer
    flat = Tensor::empty({total_numel(tensors)}, device);
  }
  pack(tensors, flat.data(), device);
  return flat;
}

void flatten_into(const std::vector<Tensor>& tensors, Tensor& flat) {
  int64_t total = total_numel(tensors);
  DPT_CHECK(total == flat.numel(), "flatten_into: tensors of " << total << " floats into a flat tensor of "
                                                               << flat.numel());
  pack(tensors, flat.data(), flat.device());
}

void unflatten(const Tensor& flat, std::vector<Tensor>& tensors) {
  int64_t total = total_numel(tensors);
  DPT_CHECK(total == flat.numel(), "unflatten: " << flat.numel() << " floats for tensors of " << total);
  unpack(flat.data(), flat.device(), tensors);
}

}  // namespace dpt
