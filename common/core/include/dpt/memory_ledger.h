/// @file memory_ledger.h
/// @brief Memory by *category*: which kind of bytes (parameters, gradients,
/// optimizer state, activations, communication buffers) a device holds, now
/// and at its peak — the numbers chapter 07 sets next to the ZeRO formulas.
///
/// A category is a per-thread tag: every allocation a thread makes while a
/// `MemoryScope` is alive is charged to that scope's category (the innermost
/// scope wins), and its release is charged back to the same category, whoever
/// frees it. Nothing tagged is `Other`.
///
///     {
///       dpt::MemoryScope scope(dpt::MemoryCategory::OptimizerState);
///       m = dpt::Tensor::zeros({shard}, ctx.device);         // counted as optimizer state
///     }
///     ctx.device.peak_bytes(dpt::MemoryCategory::OptimizerState);  // 4·shard so far
///
/// Each Device owns one MemoryLedger (device.h). Besides each category's own
/// current and peak, the ledger keeps a snapshot of every category at the
/// moment the device's total was highest: the peak's composition.
///
/// Left out: per-tensor names, allocation stacks, fragmentation.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace dpt {

/// What kind of bytes an allocation holds.
enum class MemoryCategory { Other, Params, Grads, OptimizerState, Activations, Comm };
/// Number of MemoryCategory values.
constexpr int kMemoryCategories = 6;
/// "other", "parameters", "gradients", "optimizer state", "activations", "comm buffers".
const char* memory_category_name(MemoryCategory category);

/// The category this thread's allocations are charged to now (Other by default).
MemoryCategory current_memory_category();

/// Charges this thread's allocations to `category` for the scope's lifetime
/// (scopes nest; the previous category comes back at the end).
class MemoryScope {
 public:
  /// Sets this thread's category to `category`.
  explicit MemoryScope(MemoryCategory category);
  /// Restores the category before this scope.
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryCategory previous_;
};

/// One device's bytes per category. Thread-safe. The device calls
/// on_allocate / on_release; readers call the rest.
class MemoryLedger {
 public:
  /// Charges `bytes` at `ptr` to this thread's current category.
  void on_allocate(const void* ptr, std::size_t bytes);
  /// Returns the bytes of `ptr` to the category it was charged to.
  void on_release(const void* ptr, std::size_t bytes);
  /// Bytes of `category` in use now.
  std::size_t current(MemoryCategory category) const;
  /// Most bytes of `category` in use at once since the last reset_peak().
  std::size_t peak(MemoryCategory category) const;
  /// Bytes of `category` in use at the moment the total was highest.
  std::size_t at_peak(MemoryCategory category) const;
  /// The highest total (all categories) since the last reset_peak().
  std::size_t peak_total() const;
  /// Sets every peak, and the peak's composition, to what is in use now.
  void reset_peak();

 private:
  using Counts = std::array<std::size_t, kMemoryCategories>;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, MemoryCategory> owner_;  // live block → its category
  Counts current_{}, peak_{}, at_peak_{};
  std::size_t total_ = 0, peak_total_ = 0;
};

}  // namespace dpt
