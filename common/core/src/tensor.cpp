// tensor.cpp — storage, views and copies of dpt::Tensor.
#include "dpt/tensor.h"

#include <sstream>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"

namespace dpt {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) out << ",";
  out << ")";
  return out.str();
}

Storage::Storage(Device& dev, std::size_t nbytes) : device(&dev), bytes(nbytes) {
  data = static_cast<float*>(dev.allocate(nbytes));
}

Storage::~Storage() { device->release(data, bytes); }

// ---- construction ----

Tensor Tensor::empty(const Shape& shape, Device& device) {
  for (int64_t s : shape) DPT_CHECK(s >= 0, "tensor sizes must be >= 0, got " << shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(device, shape_numel(shape) * sizeof(float));
  impl->shape = shape;
  return Tensor(std::move(impl));
}

Tensor Tensor::full(const Shape& shape, float value, Device& device) {
  Tensor t = empty(shape, device);
  kernels_for(device).fill(t.data(), value, t.numel());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, Device& device) { return full(shape, 0.0f, device); }

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values, Device& device) {
  DPT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
            "from_vector: shape " << shape_str(shape) << " needs " << shape_numel(shape)
                                  << " values, got " << values.size());
  Tensor t = empty(shape, device);
  copy_bytes(t.data(), device, values.data(), Device::host(), t.nbytes());
  return t;
}

Tensor Tensor::scalar(float value, Device& device) { return full({}, value, device); }

// ---- accessors ----

const Shape& Tensor::shape() const {
  DPT_CHECK(impl_, "use of an undefined tensor");
  return impl_->shape;
}

int64_t Tensor::size(int64_t d) const {
  int64_t nd = dim();
  int64_t k = d < 0 ? d + nd : d;
  DPT_CHECK(k >= 0 && k < nd, "dimension " << d << " out of range for shape " << shape_str(shape()));
  return impl_->shape[k];
}

Device& Tensor::device() const {
  DPT_CHECK(impl_, "use of an undefined tensor");
  return *impl_->storage->device;
}

float* Tensor::data() {
  DPT_CHECK(impl_, "use of an undefined tensor");
  return impl_->storage->data + impl_->offset;
}

const float* Tensor::data() const {
  DPT_CHECK(impl_, "use of an undefined tensor");
  return impl_->storage->data + impl_->offset;
}

float Tensor::item() const {
  DPT_CHECK(numel() == 1, "item() needs one element, tensor has shape " << shape_str(shape()));
  float value = 0;
  copy_bytes(&value, Device::host(), data(), device(), sizeof(float));
  return value;
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(numel());
  copy_bytes(out.data(), Device::host(), data(), device(), nbytes());
  return out;
}

// ---- views ----

namespace {
Tensor make_view(const Tensor& base, int64_t offset, const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = base.impl()->offset + offset;
  impl->shape = shape;
  return Tensor(std::move(impl));
}
}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  DPT_CHECK(shape_numel(shape) == numel(),
            "reshape " << shape_str(this->shape()) << " -> " << shape_str(shape) << ": sizes differ");
  return make_view(*this, 0, shape);
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  DPT_CHECK(dim() >= 1, "rows() needs at least one dimension");
  DPT_CHECK(0 <= begin && begin <= end && end <= size(0),
            "rows [" << begin << ", " << end << ") out of range for " << shape_str(shape()));
  Shape s = shape();
  int64_t row = s[0] == 0 ? 0 : numel() / s[0];
  s[0] = end - begin;
  return make_view(*this, begin * row, s);
}

Tensor Tensor::slice(int64_t begin, int64_t count) const {
  DPT_CHECK(begin >= 0 && count >= 0 && begin + count <= numel(),
            "slice [" << begin << ", " << begin + count << ") out of range for " << numel()
                      << " elements");
  return make_view(*this, begin, {count});
}

// ---- copies ----

Tensor Tensor::clone() const { return to(device()); }

Tensor Tensor::to(Device& target) const {
  Tensor out = empty(shape(), target);
  copy_bytes(out.data(), target, data(), device(), nbytes());
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  DPT_CHECK(src.numel() == numel(), "copy_from: " << shape_str(src.shape()) << " into "
                                                  << shape_str(shape()) << ": sizes differ");
  copy_bytes(data(), device(), src.data(), src.device(), nbytes());
}

// ---- autograd fields ----

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

Tensor& Tensor::set_requires_grad(bool on) {
  DPT_CHECK(impl_, "use of an undefined tensor");
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  DPT_CHECK(impl_, "use of an undefined tensor");
  return Tensor(impl_->grad);
}

void Tensor::set_grad(const Tensor& grad) {
  DPT_CHECK(impl_, "use of an undefined tensor");
  if (grad.defined())
    DPT_CHECK(grad.shape() == shape(), "set_grad: gradient " << shape_str(grad.shape())
                                           << " for a tensor " << shape_str(shape()));
  impl_->grad = grad.impl();
}

void Tensor::backward() const { dpt::backward(*this); }

void Tensor::add_grad_ready_hook(GradReadyHook hook) {
  DPT_CHECK(impl_, "use of an undefined tensor");
  impl_->grad_ready_hooks.push_back(std::move(hook));
}

void Tensor::clear_grad_ready_hooks() {
  DPT_CHECK(impl_, "use of an undefined tensor");
  impl_->grad_ready_hooks.clear();
}

}  // namespace dpt
