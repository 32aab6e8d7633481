#include "nimble/runtime/tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/copy.hpp"
#include "runtime/element.hpp"
#include "support/check.hpp"

namespace nimble {

void store_from_double(void* out, DType dtype, double value) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      *static_cast<bool*>(out) = value != 0.0;
    } else if constexpr (std::is_integral_v<T>) {
      // Casting a double outside T's range is undefined behaviour: reject it.
      constexpr auto lo = static_cast<double>(std::numeric_limits<T>::min());
      constexpr auto hi = static_cast<double>(std::numeric_limits<T>::max());
      if (!std::isfinite(value) || value < lo || value >= hi + 1.0)
        throw_error(ErrorKind::invalid_argument, "value {} is not representable as {}", value,
                    to_string(dtype));
      *static_cast<T*>(out) = static_cast<T>(value);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      *static_cast<T*>(out) = T(static_cast<float>(value));
    } else {
      *static_cast<T*>(out) = static_cast<T>(value);
    }
  });
}

namespace {

std::size_t checked_nbytes(const Shape& shape, DType dtype) {
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(shape.numel()), dtype_size(dtype), &nbytes))
    throw_error(ErrorKind::invalid_argument, "tensor of shape {} and dtype {} is too large",
                to_string(shape), to_string(dtype));
  return nbytes;
}

}  // namespace

Tensor::Tensor(Ref<Storage> storage, Shape&& shape, DType dtype, std::size_t byte_offset) noexcept
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      dtype_(dtype),
      byte_offset_(byte_offset) {}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  const std::size_t nbytes = checked_nbytes(shape, dtype);
  return Tensor(Storage::allocate(nbytes, device), std::move(shape), dtype, 0);
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  if (!device.is_cpu() && !allocator_for(device).host_accessible())
    return zeros(std::move(shape), dtype).to(device);  // written on the host, copied there
  Tensor t = empty(std::move(shape), dtype, device);
  if (t.nbytes() != 0) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(Shape shape, double value, DType dtype) {
  Tensor t = empty(std::move(shape), dtype, Device::cpu());
  t.fill(value);
  return t;
}

Tensor Tensor::from_bytes(Shape shape, DType dtype, std::span<const std::byte> bytes) {
  const std::size_t nbytes = checked_nbytes(shape, dtype);
  if (bytes.size() != nbytes)
    throw_error(ErrorKind::invalid_argument,
                "tensor data: shape {} of {} needs {} elements ({} bytes), got {} bytes",
                to_string(shape), to_string(dtype), shape.numel(), nbytes, bytes.size());
  Tensor t = empty(std::move(shape), dtype, Device::cpu());
  if (nbytes != 0) std::memcpy(t.raw_data(), bytes.data(), nbytes);
  return t;
}

Tensor Tensor::borrow_bytes(Shape shape, DType dtype, void* data, std::size_t nbytes) {
  const std::size_t needed = checked_nbytes(shape, dtype);
  if (nbytes != needed)
    throw_error(ErrorKind::invalid_argument,
                "borrowed memory: shape {} of {} needs {} elements ({} bytes), got {} bytes",
                to_string(shape), to_string(dtype), shape.numel(), needed, nbytes);
  if (reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) != 0)
    throw_error(ErrorKind::invalid_argument,
                "borrowed memory: a {} tensor needs {}-byte alignment, got address {}",
                to_string(dtype), dtype_size(dtype), data);
  return Tensor(Storage::borrow(data, nbytes, Device::cpu()), std::move(shape), dtype, 0);
}

Tensor Tensor::view_of(Ref<Storage> storage, Shape shape, DType dtype, std::size_t byte_offset) {
  if (!storage)
    throw_error(ErrorKind::invalid_argument, "tensor view: expected a storage, got null");
  const std::size_t nbytes = checked_nbytes(shape, dtype);
  if (byte_offset % dtype_size(dtype) != 0)
    throw_error(ErrorKind::invalid_argument,
                "tensor view: byte offset {} is not a multiple of the {} element size {}",
                byte_offset, to_string(dtype), dtype_size(dtype));
  if (byte_offset > storage->nbytes() || nbytes > storage->nbytes() - byte_offset)
    throw_error(ErrorKind::out_of_range,
                "tensor view: {} bytes at offset {} do not fit in a storage of {} bytes", nbytes,
                byte_offset, storage->nbytes());
  return Tensor(std::move(storage), std::move(shape), dtype, byte_offset);
}

Device Tensor::device() const noexcept {
  return storage_ ? storage_->device() : Device::cpu();
}

bool Tensor::is_borrowed() const noexcept { return storage_ && storage_->is_borrowed(); }

void Tensor::check_access(DType requested, const char* accessor) const {
  if (!storage_)
    throw_error(ErrorKind::invalid_argument,
                "Tensor::{}<{}>: the tensor is undefined (default-constructed)", accessor,
                to_string(requested));
  if (requested != dtype_)
    throw_error(ErrorKind::type_error, "Tensor::{}<{}>: expected a {} tensor, got dtype {}",
                accessor, to_string(requested), to_string(requested), to_string(dtype_));
  if (!storage_->host_accessible())
    throw_error(ErrorKind::invalid_argument,
                "Tensor::{}: elements of a tensor on {} cannot be read on the host", accessor,
                to_string(storage_->device()));
}

std::int64_t Tensor::flat_index(std::initializer_list<std::int64_t> index) const {
  if (index.size() != rank())
    throw_error(ErrorKind::out_of_range,
                "Tensor::at: expected {} indices for shape {}, got {}", rank(),
                to_string(shape_), index.size());
  std::int64_t flat = 0;
  std::size_t axis = 0;
  for (std::int64_t i : index) {
    const std::int64_t extent = shape_[axis];
    if (i < 0 || i >= extent)
      throw_error(ErrorKind::out_of_range,
                  "Tensor::at: index {} is out of range for dim {} of size {} (shape {})", i,
                  axis, extent, to_string(shape_));
    flat = flat * extent + i;
    ++axis;
  }
  return flat;
}

void* Tensor::raw_data() {
  check_access(dtype_, "raw_data");
  return raw_data_unchecked();
}

const void* Tensor::raw_data() const {
  check_access(dtype_, "raw_data");
  return raw_data_unchecked();
}

double Tensor::element_as_double(std::int64_t flat) const {
  check_access(dtype_, "element_as_double");
  if (flat < 0 || flat >= numel())
    throw_error(ErrorKind::out_of_range,
                "Tensor::element_as_double: flat index {} is out of range for {} elements", flat,
                numel());
  return load_as_double(raw_data_unchecked(), dtype_, flat);
}

namespace {

// A copy of `t` (defined) in fresh storage on `device`.
Tensor copy_on(const Tensor& t, Device device) {
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), device);
  runtime::copy_bytes(*copy.storage(), runtime::address_of(copy), *t.storage(), runtime::address_of(t), t.nbytes());
  return copy;
}

}  // namespace

Tensor Tensor::clone() const {
  if (!storage_) throw_error(ErrorKind::invalid_argument, "Tensor::clone: the tensor is undefined (default-constructed)");
  return copy_on(*this, device());
}

Tensor Tensor::to(Device device) const {
  if (!storage_) throw_error(ErrorKind::invalid_argument, "Tensor::to: the tensor is undefined (default-constructed)");
  return this->device() == device ? *this : copy_on(*this, device);
}

Tensor Tensor::reshape(Shape shape) const {
  if (!storage_)
    throw_error(ErrorKind::invalid_argument, "Tensor::reshape: the tensor is undefined");
  if (shape.numel() != numel())
    throw_error(ErrorKind::invalid_argument,
                "Tensor::reshape: cannot view shape {} ({} elements) as {} ({} elements)",
                to_string(shape_), numel(), to_string(shape), shape.numel());
  return Tensor(storage_, std::move(shape), dtype_, byte_offset_);
}

void Tensor::fill(double value) {
  check_access(dtype_, "fill");
  if (numel() == 0) return;
  // Convert once (this validates `value`), then replicate the element.
  alignas(8) std::byte element[8];
  store_from_double(element, dtype_, value);
  const std::size_t size = dtype_size(dtype_);
  auto* out = static_cast<std::byte*>(raw_data_unchecked());
  for (std::int64_t i = 0; i < numel(); ++i)
    std::memcpy(out + static_cast<std::size_t>(i) * size, element, size);
}

}  // namespace nimble

namespace nimble::runtime {

void copy_bytes(const Storage& to, void* dst, const Storage& from, const void* src, std::size_t n) {
  if (n == 0) return;
  if (from.host_accessible() && to.host_accessible()) {
    std::memcpy(dst, src, n);
  } else if (from.host_accessible()) {
    to.allocator().copy_from_host(dst, src, n);
  } else if (to.host_accessible()) {
    from.allocator().copy_to_host(dst, src, n);
  } else if (from.device() == to.device()) {
    to.allocator().copy_within(dst, src, n);
  } else {  // between two GPUs: through the host
    std::vector<std::byte> staging(n);
    from.allocator().copy_to_host(staging.data(), src, n);
    to.allocator().copy_from_host(dst, staging.data(), n);
  }
}

}  // namespace nimble::runtime
