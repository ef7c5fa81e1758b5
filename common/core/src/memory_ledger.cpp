// memory_ledger.cpp — per-thread category tags and per-device byte counts by category.
#include "dpt/memory_ledger.h"

namespace dpt {

namespace {
thread_local MemoryCategory t_category = MemoryCategory::Other;
std::size_t index_of(MemoryCategory c) { return static_cast<std::size_t>(c); }
}  // namespace

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Other: return "other";
    case MemoryCategory::Params: return "parameters";
    case MemoryCategory::Grads: return "gradients";
    case MemoryCategory::OptimizerState: return "optimizer state";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Comm: return "comm buffers";
  }
  return "?";
}

MemoryCategory current_memory_category() { return t_category; }

MemoryScope::MemoryScope(MemoryCategory category) : previous_(t_category) { t_category = category; }
MemoryScope::~MemoryScope() { t_category = previous_; }

void MemoryLedger::on_allocate(const void* ptr, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t c = index_of(t_category);
  owner_[ptr] = t_category;
  current_[c] += bytes;
  if (current_[c] > peak_[c]) peak_[c] = current_[c];
  total_ += bytes;
  if (total_ > peak_total_) {  // a new high: remember what it is made of
    peak_total_ = total_;
    at_peak_ = current_;
  }
}

void MemoryLedger::on_release(const void* ptr, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = owner_.find(ptr);
  if (it == owner_.end()) return;  // allocated before the ledger existed: nothing to return
  current_[index_of(it->second)] -= bytes;
  total_ -= bytes;
  owner_.erase(it);
}

std::size_t MemoryLedger::current(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_[index_of(category)];
}

std::size_t MemoryLedger::peak(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_[index_of(category)];
}

std::size_t MemoryLedger::at_peak(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return at_peak_[index_of(category)];
}

std::size_t MemoryLedger::peak_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_total_;
}

void MemoryLedger::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = current_;
  at_peak_ = current_;
  peak_total_ = total_;
}

}  // namespace dpt
