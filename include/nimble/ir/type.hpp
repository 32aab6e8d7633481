// Types of nimble's IR: tensors with static, `Any` or symbolic dims, tuples,
// functions and algebraic data types.
//
// Types are small immutable values shared by reference (copying a Type copies
// a handle). Two types are equal (==) when they are structurally equal; dims
// compare by kind, value, and symbol name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nimble/runtime/dtype.hpp"
#include "nimble/support/ref_counted.hpp"

namespace nimble::ir {

/// One dimension of a TensorType: a constant, `Any` (unknown until run time,
/// unrelated to other dims) or a named symbol. Dims with the same symbol
/// name within one function are equal at run time. A symbol may carry an
/// upper bound that memory planning and bucketing may use and the runtime
/// enforces.
class Dim {
 public:
  enum class Kind : std::uint8_t { fixed, any, symbol };

  /// A constant dim; throws Error(invalid_argument) when negative.
  Dim(std::int64_t value);  // NOLINT: implicit, so that {2, 3} reads as dims
  Dim(int value) : Dim(static_cast<std::int64_t>(value)) {}  // NOLINT
  /// A symbol `name`, optionally bounded: run-time values must be <= bound.
  explicit Dim(std::string name, std::optional<std::int64_t> upper_bound = std::nullopt);
  [[nodiscard]] static Dim any() noexcept { return Dim(Kind::any); }

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_fixed() const noexcept { return kind_ == Kind::fixed; }
  [[nodiscard]] bool is_any() const noexcept { return kind_ == Kind::any; }
  [[nodiscard]] bool is_symbol() const noexcept { return kind_ == Kind::symbol; }
  /// The constant (fixed dims only).
  [[nodiscard]] std::int64_t value() const noexcept { return value_; }
  /// The symbol's name (symbols only).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The symbol's upper bound, if it has one.
  [[nodiscard]] std::optional<std::int64_t> upper_bound() const noexcept;

  friend bool operator==(const Dim& a, const Dim& b) noexcept;

 private:
  explicit Dim(Kind kind) noexcept : kind_(kind) {}
  Kind kind_;
  std::int64_t value_ = -1;  // fixed: the value; symbol: the upper bound or -1
  std::string name_;
};

/// `Any`, for shapes: f32({Any, 300}).
inline const Dim Any = Dim::any();

/// "3", "?", "n", "n<=512".
[[nodiscard]] std::string to_string(const Dim& dim);

enum class TypeKind : std::uint8_t {
  tensor,      ///< TensorType
  tuple,       ///< TupleType
  func,        ///< FuncType
  adt,         ///< AdtType: an algebraic data type applied to type arguments
  type_var,    ///< TypeVar: a type parameter of an ADT definition
  incomplete,  ///< a type inference has not determined yet (internal to inference)
};

class TypeNode : public RefCounted {
 public:
  /// Nested types are torn down without recursion (ref_counted.hpp).
  static constexpr bool kDeferredTeardown = true;
  const TypeKind kind;
  /// Levels of nesting: 1 for a tensor type or a type variable, one more
  /// than its deepest part for a tuple, function or ADT type.
  const std::uint32_t depth;
  virtual ~TypeNode() = default;

 protected:
  explicit TypeNode(TypeKind k, std::uint32_t d = 1) : kind(k), depth(d) {}
};

/// The deepest nesting a type may have (the IR text's nesting limit; an
/// executable's signatures allow 64): the type constructors throw
/// Error(resource_exhausted) past it, so every walk over a type may recurse.
inline constexpr std::uint32_t kMaxTypeDepth = 1000;
/// The highest rank a tensor type may have.
inline constexpr std::size_t kMaxTensorRank = 64;

class TensorTypeNode;
class TupleTypeNode;
class FuncTypeNode;
class AdtTypeNode;
class TypeVarNode;
class IncompleteTypeNode;

/// A handle to an immutable type node; null when default-constructed.
class Type {
 public:
  Type() = default;
  explicit Type(Ref<const TypeNode> node) : node_(std::move(node)) {}

  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  [[nodiscard]] TypeKind kind() const noexcept { return node_->kind; }
  [[nodiscard]] const TypeNode* get() const noexcept { return node_.get(); }
  /// The node as `T` if it is one (by kind), else nullptr.
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  [[nodiscard]] bool is_tensor() const noexcept { return node_ && kind() == TypeKind::tensor; }

  friend bool operator==(const Type& a, const Type& b) noexcept;

 private:
  Ref<const TypeNode> node_;
};

/// The depth of the deepest of `types` (0 for none).
[[nodiscard]] inline std::uint32_t max_depth(const std::vector<Type>& types) noexcept {
  std::uint32_t d = 0;
  for (const Type& t : types)
    if (t.defined()) d = std::max(d, t.get()->depth);
  return d;
}

class TensorTypeNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::tensor;
  TensorTypeNode(std::vector<Dim> s, DType d) : TypeNode(kKind), shape(std::move(s)), dtype(d) {}
  const std::vector<Dim> shape;
  const DType dtype;
  [[nodiscard]] std::size_t rank() const noexcept { return shape.size(); }
};

class TupleTypeNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::tuple;
  explicit TupleTypeNode(std::vector<Type> f)
      : TypeNode(kKind, 1 + max_depth(f)), fields(std::move(f)) {}
  const std::vector<Type> fields;
};

class FuncTypeNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::func;
  FuncTypeNode(std::vector<Type> p, Type r)
      : TypeNode(kKind, 1 + std::max(max_depth(p), r.defined() ? r.get()->depth : 0)),
        params(std::move(p)),
        ret(std::move(r)) {}
  const std::vector<Type> params;
  const Type ret;
};

/// An ADT applied to its type arguments, e.g. List<f32[?, 512]>. The ADT is
/// named, not held (definitions refer to themselves); the module resolves
/// the name to its AdtDef.
class AdtTypeNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::adt;
  AdtTypeNode(std::string n, std::vector<Type> a)
      : TypeNode(kKind, 1 + max_depth(a)), name(std::move(n)), args(std::move(a)) {}
  const std::string name;
  const std::vector<Type> args;
};

/// A type parameter of an ADT definition ("T" in List<T>).
class TypeVarNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::type_var;
  explicit TypeVarNode(std::string n) : TypeNode(kKind), name(std::move(n)) {}
  const std::string name;
};

/// An unknown type (a hole) that type inference solves by joining; never appears
/// in a checked program. `id` names it in messages ("?T1").
class IncompleteTypeNode final : public TypeNode {
 public:
  static constexpr TypeKind kKind = TypeKind::incomplete;
  explicit IncompleteTypeNode(std::uint32_t i) : TypeNode(kKind), id(i) {}
  const std::uint32_t id;
};

// --- Constructors (Error(resource_exhausted) past kMaxTypeDepth or kMaxTensorRank) ---
[[nodiscard]] Type tensor_type(std::vector<Dim> shape, DType dtype);
[[nodiscard]] Type tuple_type(std::vector<Type> fields);
[[nodiscard]] Type func_type(std::vector<Type> params, Type ret);
[[nodiscard]] Type adt_type(std::string name, std::vector<Type> args = {});
[[nodiscard]] Type type_var(std::string name);
/// Scalar (rank-0) tensor types.
[[nodiscard]] Type scalar_type(DType dtype);

/// IR text of a type: "f32[?, 1, 300]", "(f32[2], i64[])", "fn(f32[2]) -> f32[]",
/// "List<f32[n, 512]>", "T".
[[nodiscard]] std::string to_string(const Type& type);

}  // namespace nimble::ir
