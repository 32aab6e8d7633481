// Values that cross between the host and a compiled program: tensors, tuples
// and constructed ADT values (a tree, a list), nested to any depth.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nimble/runtime/tensor.hpp"
#include "nimble/support/ref_counted.hpp"

namespace nimble {

class ValueNode;

/// An object a Value can hold that the runtime does not look into: a closure
/// of the interpreter or of the VM. Deleted through this base.
class Object : public RefCounted {
 public:
  /// A chain of closures capturing closures is torn down without recursion.
  static constexpr bool kDeferredTeardown = true;
  virtual ~Object() = default;
};

/// An immutable value shared by reference: a Tensor, a tuple of values, or an
/// ADT value (a constructor tag with its fields). Copying a Value copies a
/// handle. Destroying a long list or a deep tree does not recurse on the C++
/// stack. Thread safety: as Tensor.
class Value {
 public:
  enum class Kind : std::uint8_t { tensor, tuple, adt, object };

  /// An undefined value.
  Value() noexcept;
  // Out of line: ValueNode is private to the runtime.
  Value(const Value&) noexcept;
  Value(Value&&) noexcept;
  Value& operator=(const Value&) noexcept;
  Value& operator=(Value&&) noexcept;
  ~Value();
  Value(Tensor tensor);  // NOLINT: implicit, a tensor is a value
  [[nodiscard]] static Value tuple(std::vector<Value> fields);
  /// The value of the constructor with tag `tag` (its index in the ADT
  /// definition) applied to `fields`. Builder's Constructor::value() checks
  /// the arity by name.
  [[nodiscard]] static Value adt(std::uint32_t tag, std::vector<Value> fields);
  /// A value holding `object` (a closure).
  [[nodiscard]] static Value object(Ref<Object> object);

  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  /// Throws Error(invalid_argument) if undefined.
  [[nodiscard]] Kind kind() const;
  [[nodiscard]] bool is_tensor() const noexcept;
  /// The tensor, or null when the value is undefined or not a tensor: one
  /// test where is_tensor() and tensor() make two (a VM call's arguments).
  [[nodiscard]] const Tensor* as_tensor() const noexcept;
  /// The tensor; throws Error(type_error) naming what the value is instead.
  [[nodiscard]] const Tensor& tensor() const;
  /// The fields of a tuple or ADT value; throws Error(type_error) for a tensor.
  [[nodiscard]] std::span<const Value> fields() const;
  /// Field `i`; throws Error(out_of_range) past the end.
  [[nodiscard]] const Value& operator[](std::size_t i) const;
  /// The constructor tag of an ADT value; throws Error(type_error) otherwise.
  [[nodiscard]] std::uint32_t tag() const;
  /// The object of an object value; throws Error(type_error) otherwise.
  [[nodiscard]] const Ref<Object>& object() const;

  /// The value with every tensor in it (through tuple and ADT fields) on
  /// `device`, as Tensor::to moves each: a model's weights moved to a GPU
  /// once, which its calls then read there without copies. Objects (closures)
  /// are kept as they are. Integer
  /// scalars a program branches on belong on the CPU: move weights, not
  /// those. Throws as Tensor::to does.
  [[nodiscard]] Value to(Device device) const;

 private:
  friend class ValueNode;
  explicit Value(Ref<ValueNode> node) noexcept;
  Ref<ValueNode> node_;
};

/// "Tensor<f32>[2] ...", "(v0, v1)", "#1(v0, v1)" for constructor tag 1,
/// "<object>".
[[nodiscard]] std::string to_string(const Value& value);

}  // namespace nimble
