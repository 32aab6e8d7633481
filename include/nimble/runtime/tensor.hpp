// nimble::Tensor: a contiguous, reference-counted n-d array on a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "nimble/error.hpp"
#include "nimble/runtime/device.hpp"
#include "nimble/runtime/dtype.hpp"
#include "nimble/runtime/shape.hpp"
#include "nimble/runtime/storage.hpp"

namespace nimble {

/// A view of `shape.numel()` contiguous row-major elements of `dtype`, starting
/// `byte_offset` bytes into a Storage. Copying a Tensor copies the handle, not
/// the data (use clone() for a deep copy); the storage lives while any tensor
/// views it. A default-constructed Tensor is undefined: it has no storage and
/// every element access throws.
///
/// Thread safety: handles may be copied and destroyed concurrently; element
/// data is not synchronized.
class Tensor {
 public:
  /// An undefined tensor. (User-provided, not `= default`: value-initializing
  /// a class with a defaulted constructor zeroes all of it first, a
  /// `rep stos` on every `Tensor()` in the VM's hot paths.)
  Tensor() noexcept {}  // NOLINT(modernize-use-equals-default)

  // --- Construction ------------------------------------------------------
  /// Uninitialized elements.
  [[nodiscard]] static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  [[nodiscard]] static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  /// Every element set to `value` converted to `dtype` (as static_cast; bool is
  /// value != 0). Throws Error(invalid_argument) if `value` is NaN/inf or out of
  /// range for an integer dtype.
  [[nodiscard]] static Tensor full(Shape shape, double value, DType dtype);
  /// Copies `values` (which must hold exactly shape.numel() elements).
  template <class T>
  [[nodiscard]] static Tensor from_data(Shape shape, std::span<const T> values) {
    return from_bytes(std::move(shape), dtype_of<T>,
                      {reinterpret_cast<const std::byte*>(values.data()), values.size_bytes()});
  }
  template <class T>
  [[nodiscard]] static Tensor from_data(Shape shape, std::initializer_list<T> values) {
    return from_data(std::move(shape), std::span<const T>(values.begin(), values.size()));
  }
  /// A rank-0 tensor holding `value`.
  template <class T>
  [[nodiscard]] static Tensor scalar(T value) {
    return from_data(Shape{}, std::span<const T>(&value, 1));
  }
  /// Copies raw bytes, which must be exactly shape.numel() * dtype_size(dtype).
  [[nodiscard]] static Tensor from_bytes(Shape shape, DType dtype,
                                         std::span<const std::byte> bytes);
  /// A tensor over host memory that the caller owns: no copy, never freed by
  /// nimble. The caller keeps `memory` alive as long as the tensor (or any
  /// copy or view of it) is used. `memory` must hold shape.numel() elements.
  /// Memory of const T is for arguments: nimble never writes a tensor it is
  /// given (VirtualMachine::invoke, evaluate and kernels write only tensors
  /// they allocate), and the caller promises not to write through the
  /// tensor's mutable accessors either.
  template <class T>
  [[nodiscard]] static Tensor borrow(Shape shape, std::span<T> memory) {
    using Element = std::remove_const_t<T>;
    return borrow_bytes(std::move(shape), dtype_of<Element>,
                        const_cast<Element*>(memory.data()),  // see above: never written
                        memory.size_bytes());
  }
  /// As borrow(), for untyped memory; `data` must be aligned to dtype_size(dtype).
  [[nodiscard]] static Tensor borrow_bytes(Shape shape, DType dtype, void* data,
                                           std::size_t nbytes);
  /// A view of `storage` at `byte_offset`; throws Error if the view does not
  /// fit in the storage or the offset is not aligned to the element size.
  [[nodiscard]] static Tensor view_of(Ref<Storage> storage, Shape shape, DType dtype,
                                      std::size_t byte_offset = 0);

  // --- Properties --------------------------------------------------------
  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(storage_); }
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] Device device() const noexcept;
  [[nodiscard]] std::size_t rank() const noexcept { return shape_.rank(); }
  [[nodiscard]] std::int64_t dim(std::int64_t axis) const { return shape_.dim(axis); }
  [[nodiscard]] std::int64_t numel() const noexcept { return shape_.numel(); }
  [[nodiscard]] std::size_t nbytes() const noexcept {
    return static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  }
  [[nodiscard]] std::size_t byte_offset() const noexcept { return byte_offset_; }
  [[nodiscard]] const Ref<Storage>& storage() const noexcept { return storage_; }
  /// True when the elements live in host-owned (borrowed) memory.
  [[nodiscard]] bool is_borrowed() const noexcept;

  // --- Element access (throws Error on a dtype mismatch or undefined tensor)
  template <class T>
  [[nodiscard]] T* data() {
    check_access(dtype_of<T>, "data");
    return static_cast<T*>(raw_data_unchecked());
  }
  template <class T>
  [[nodiscard]] const T* data() const {
    check_access(dtype_of<T>, "data");
    return static_cast<const T*>(raw_data_unchecked());
  }
  template <class T>
  [[nodiscard]] std::span<T> values() {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }
  template <class T>
  [[nodiscard]] std::span<const T> values() const {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }
  /// The element at a full multi-index; throws Error(out_of_range) for a wrong
  /// number of indices or an index outside its dim.
  template <class T>
  [[nodiscard]] T& at(std::initializer_list<std::int64_t> index) {
    check_access(dtype_of<T>, "at");
    return static_cast<T*>(raw_data_unchecked())[flat_index(index)];
  }
  template <class T>
  [[nodiscard]] const T& at(std::initializer_list<std::int64_t> index) const {
    check_access(dtype_of<T>, "at");
    return static_cast<const T*>(raw_data_unchecked())[flat_index(index)];
  }
  /// Untyped pointer to the first element (host tensors only).
  [[nodiscard]] void* raw_data();
  [[nodiscard]] const void* raw_data() const;
  /// Element `flat` (row-major) of any dtype, as a double.
  [[nodiscard]] double element_as_double(std::int64_t flat) const;

  // --- Whole-tensor operations ---------------------------------------------
  /// A deep copy into fresh storage on the same device.
  [[nodiscard]] Tensor clone() const;
  /// The tensor on `device`: itself when it is there already, else a copy
  /// into fresh storage there (host ↔ GPU through the driver). Throws
  /// Error(not_supported) for a device this process has no allocator for
  /// (no CUDA driver or device), Error(runtime_error) when a copy fails.
  [[nodiscard]] Tensor to(Device device) const;
  /// A view with a new shape of the same element count, sharing storage.
  [[nodiscard]] Tensor reshape(Shape shape) const;
  /// Sets every element to `value` (converted as in full()).
  void fill(double value);

 private:
  // Takes the shape by rvalue: every caller hands over one it made, and each
  // Shape move copies its inline dims.
  Tensor(Ref<Storage> storage, Shape&& shape, DType dtype, std::size_t byte_offset) noexcept;
  void check_access(DType requested, const char* accessor) const;
  [[nodiscard]] std::int64_t flat_index(std::initializer_list<std::int64_t> index) const;
  [[nodiscard]] void* raw_data_unchecked() const noexcept {
    return static_cast<std::byte*>(storage_->data()) + byte_offset_;
  }

  Ref<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  std::size_t byte_offset_ = 0;
};

/// How to_string() prints a tensor.
struct TensorPrintOptions {
  /// A dim longer than this prints its first and last `edge_items` entries
  /// with "..." between.
  std::int64_t threshold = 8;
  std::int64_t edge_items = 3;
  int precision = 6;  ///< significant digits of floating-point elements
};

/// E.g. "Tensor<f32>[2, 3] cpu\n[[1, 2, 3],\n [4, 5, 6]]". Large dims are
/// truncated (see TensorPrintOptions); an undefined tensor prints "Tensor<undefined>".
[[nodiscard]] std::string to_string(const Tensor& tensor, const TensorPrintOptions& options = {});

}  // namespace nimble
