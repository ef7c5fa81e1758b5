/// @file tensor.h
/// @brief `Tensor`: a float32, row-major, contiguous array on a `Device`, that
/// autograd can differentiate through.
///
/// A Tensor is a cheap handle (a shared pointer): copying it aliases the same
/// storage, like a PyTorch tensor. Views (`reshape`, `rows`, `slice`) share the
/// storage and are always contiguous, which keeps every kernel a plain loop
/// over `data()[0 .. numel())`. Deliberately left out: strides, dtypes other
/// than float32 (labels are `std::vector<int64_t>`), broadcasting.
///
///     dpt::Tensor w = dpt::Tensor::zeros({256, 784}, dpt::Device::cpu(0));
///     w.set_requires_grad(true);           // a parameter: backward() fills w.grad()
///     dpt::Tensor first = w.rows(0, 1);    // (1, 784) view of row 0
///
/// Autograd fields (grad, grad_fn, grad-ready hooks) live here because every
/// tensor may carry them; the graph itself is in autograd.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/device.h"

namespace dpt {

/// A tensor's shape: sizes per dimension, outermost first.
using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar, shape {}).
int64_t shape_numel(const Shape& shape);
/// "(64, 784)".
std::string shape_str(const Shape& shape);

/// Bytes owned on one device; freed (and un-counted) when the last tensor goes.
struct Storage {
  Device* device = nullptr;  ///< where the bytes live
  float* data = nullptr;     ///< first float
  std::size_t bytes = 0;     ///< size in bytes
  /// Allocates `nbytes` on `dev` (counted there).
  Storage(Device& dev, std::size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct Node;
class Tensor;

/// Called with a parameter the moment its gradient is final during backward().
using GradReadyHook = std::function<void(Tensor& param)>;

/// What a Tensor handle points at. Internal: use Tensor's methods.
struct TensorImpl {
  std::shared_ptr<Storage> storage;  ///< shared by views
  int64_t offset = 0;  ///< first element, in floats, inside storage
  Shape shape;                 ///< sizes, outermost first
  bool requires_grad = false;  ///< a leaf parameter, or computed from one
  std::shared_ptr<TensorImpl> grad;   ///< accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;      ///< the op that produced this tensor
  std::vector<GradReadyHook> grad_ready_hooks;  ///< see Tensor::add_grad_ready_hook
};

/// Float32 row-major contiguous tensor handle. See the file comment.
class Tensor {
 public:
  /// An undefined tensor (`defined()` is false).
  Tensor() = default;

  /// Uninitialised tensor of `shape` on `device`.
  static Tensor empty(const Shape& shape, Device& device);
  /// Zeros of `shape` on `device`.
  static Tensor zeros(const Shape& shape, Device& device);
  /// `value` everywhere, `shape` on `device`.
  static Tensor full(const Shape& shape, float value, Device& device);
  /// Copies `values` (numel(shape) of them) into a new tensor.
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values,
                            Device& device);
  /// A scalar (shape {}).
  static Tensor scalar(float value, Device& device);

  /// False for a default-constructed (undefined) tensor.
  bool defined() const { return impl_ != nullptr; }
  /// Sizes per dimension.
  const Shape& shape() const;
  /// Number of dimensions.
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  /// Size of dimension `d`; negative `d` counts from the end.
  int64_t size(int64_t d) const;
  /// Number of elements.
  int64_t numel() const { return shape_numel(shape()); }
  /// numel() · 4 bytes.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * sizeof(float); }
  /// The device holding the storage.
  Device& device() const;

  /// Pointer to element 0 (host memory for host and cpu:k devices).
  ///@{
  float* data();
  const float* data() const;
  ///@}
  /// The only element of a one-element tensor, copied to the host.
  float item() const;
  /// All elements, copied to the host.
  std::vector<float> to_vector() const;

  // ---- views (share storage, never copy) ----
  /// Same elements, new shape with the same numel.
  Tensor reshape(const Shape& shape) const;
  /// Rows [begin, end) along dimension 0.
  Tensor rows(int64_t begin, int64_t end) const;
  /// Flat elements [begin, begin+count) as a 1-D view.
  Tensor slice(int64_t begin, int64_t count) const;
  /// Flat 1-D view of all elements.
  Tensor flatten() const { return reshape({numel()}); }

  // ---- copies ----
  /// A new tensor with the same values on the same device (no autograd link).
  Tensor clone() const;
  /// A copy on `device` (no autograd link). Counted on the target device.
  Tensor to(Device& device) const;
  /// Copies values from `src` (same numel, any device) into this tensor.
  void copy_from(const Tensor& src);

  // ---- autograd ----
  /// True for a parameter or a tensor computed from one (while grad mode is on).
  bool requires_grad() const;
  /// Marks a leaf whose gradient backward() accumulates (a parameter).
  Tensor& set_requires_grad(bool on);
  /// The accumulated gradient (undefined until a backward() reaches it).
  Tensor grad() const;
  /// Replaces the gradient (e.g. with averaged values); undefined clears it.
  void set_grad(const Tensor& grad);
  /// Clears the gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad() { set_grad(Tensor()); }
  /// Runs reverse-mode autograd from this scalar (see autograd.h).
  void backward() const;
  /// Registers `hook` to run the moment this leaf's gradient is final during
  /// backward() (what chapter 05 hangs gradient buckets on).
  void add_grad_ready_hook(GradReadyHook hook);
  /// Removes every grad-ready hook of this tensor.
  void clear_grad_ready_hooks();
  /// True when both handles alias the same tensor object.
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  /// Internal: the shared implementation (autograd and ops use it).
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  /// Wraps an implementation (autograd and ops use it).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// A tensor with the name it is saved under ("fc0.weight").
struct NamedTensor {
  std::string name;  ///< e.g. "fc0.weight"
  Tensor tensor;     ///< the tensor itself (a handle)
};

}  // namespace dpt
