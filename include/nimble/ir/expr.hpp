// Expressions of nimble's IR.
//
// Nodes are small immutable values with a kind tag, shared by reference
// (Halide / Relay style); dispatch on kind() with as<T>(), never dynamic_cast.
// Each node remembers where the builder (or the parser) created it, for
// error messages, and carries the type inference gave it (checked_type).
// Variables are compared by identity: two Vars with the same name are
// different variables.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nimble/ir/type.hpp"
#include "nimble/runtime/tensor.hpp"

namespace nimble::ir {

/// Where a node was made: a C++ source position (builder) or a position in IR
/// text (parser). `file` points to storage that lives as long as the program.
struct SourceLoc {
  const char* file = nullptr;
  std::uint32_t line = 0;
  std::uint32_t column = 0;

  [[nodiscard]] static SourceLoc from(const std::source_location& loc) noexcept {
    return {loc.file_name(), loc.line(), loc.column()};
  }
  [[nodiscard]] bool known() const noexcept { return file != nullptr; }
};

/// "lstm.cpp:42" (the file's base name and the line); "" when unknown.
[[nodiscard]] std::string to_string(const SourceLoc& loc);

/// A value of an op attribute.
using AttrValue =
    std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>, DType>;

/// Named attributes of an op call (axis=1, keepdims=true), in a fixed order.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  /// Sets `name` (replacing an existing value).
  Attrs& set(std::string name, AttrValue value);
  [[nodiscard]] const AttrValue* find(std::string_view name) const noexcept;
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] const std::vector<std::pair<std::string, AttrValue>>& items() const noexcept {
    return items_;
  }
  friend bool operator==(const Attrs&, const Attrs&) = default;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

/// IR text of an attribute value: true, 3, 0.125, "s", [1, 2], f32.
[[nodiscard]] std::string to_string(const AttrValue& value);

enum class ExprKind : std::uint8_t {
  var,          ///< a local variable (parameter, let, pattern binding)
  constant,     ///< a Tensor
  global_var,   ///< a reference to a global function (@name)
  op,           ///< a primitive operator
  constructor,  ///< a constructor of an ADT
  call,         ///< callee(args...) [attrs]
  let,          ///< let var = value; body
  if_,          ///< if (cond) then else
  tuple,        ///< (a, b, ...)
  tuple_get,    ///< tuple.index
  function,     ///< fn (params) -> ret { body }: a global's body or a closure
  match,        ///< match (value) { pattern => body, ... }
};

class ExprNode : public RefCounted {
 public:
  /// A chain of a million lets, or an operand nested a million deep, is torn
  /// down without recursion (ref_counted.hpp).
  static constexpr bool kDeferredTeardown = true;
  const ExprKind kind;
  const SourceLoc loc;
  /// The type inference assigned (undefined before inference).
  mutable Type checked_type;
  virtual ~ExprNode() = default;

 protected:
  ExprNode(ExprKind k, SourceLoc l) : kind(k), loc(l) {}
};

/// A handle to an immutable expression node; null when default-constructed.
class Expr {
 public:
  Expr() = default;
  explicit Expr(Ref<const ExprNode> node) : node_(std::move(node)) {}

  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  [[nodiscard]] ExprKind kind() const noexcept { return node_->kind; }
  [[nodiscard]] const ExprNode* get() const noexcept { return node_.get(); }
  const ExprNode* operator->() const noexcept { return node_.get(); }
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  /// The inferred type (undefined before inference).
  [[nodiscard]] const Type& type() const noexcept { return node_->checked_type; }
  /// Identity: the same node.
  [[nodiscard]] bool same_as(const Expr& other) const noexcept { return node_ == other.node_; }

 private:
  Ref<const ExprNode> node_;
};

// --- Leaves --------------------------------------------------------------------

class VarNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::var;
  VarNode(std::string n, Type annotation, SourceLoc l)
      : ExprNode(kKind, l), name(std::move(n)), type_annotation(std::move(annotation)) {}
  const std::string name;
  /// The declared type (parameters always have one); may be undefined for lets.
  const Type type_annotation;
};

class ConstantNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::constant;
  ConstantNode(Tensor v, SourceLoc l) : ExprNode(kKind, l), value(std::move(v)) {}
  const Tensor value;
};

class GlobalVarNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::global_var;
  GlobalVarNode(std::string n, SourceLoc l) : ExprNode(kKind, l), name(std::move(n)) {}
  const std::string name;
};

struct OpDef;  // lib/ir/op.hpp

class OpNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::op;
  OpNode(const OpDef* d, SourceLoc l) : ExprNode(kKind, l), def(d) {}
  const OpDef* const def;  // static storage, owned by the op registry
};

/// A constructor of an ADT definition.
struct ConstructorDef {
  std::string name;
  std::vector<Type> fields;  ///< may mention the ADT's type parameters
};

/// An algebraic data type: `type List<T> { Nil, Cons(T, List<T>) }`.
class AdtDefNode final : public RefCounted {
 public:
  AdtDefNode(std::string n, std::vector<std::string> params, std::vector<ConstructorDef> ctors)
      : name(std::move(n)), type_params(std::move(params)), constructors(std::move(ctors)) {}
  const std::string name;
  const std::vector<std::string> type_params;
  const std::vector<ConstructorDef> constructors;  ///< a constructor's tag is its index
  /// The tag of constructor `name`, or -1.
  [[nodiscard]] int find_constructor(std::string_view ctor_name) const noexcept;
};
using AdtDef = Ref<const AdtDefNode>;

class ConstructorNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::constructor;
  ConstructorNode(AdtDef a, std::uint32_t t, SourceLoc l)
      : ExprNode(kKind, l), adt(std::move(a)), tag(t) {}
  const AdtDef adt;
  const std::uint32_t tag;
  [[nodiscard]] const ConstructorDef& def() const noexcept { return adt->constructors[tag]; }
};

// --- Compound --------------------------------------------------------------------

class CallNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::call;
  CallNode(Expr c, std::vector<Expr> a, Attrs at, SourceLoc l)
      : ExprNode(kKind, l), callee(std::move(c)), args(std::move(a)), attrs(std::move(at)) {}
  const Expr callee;  ///< an op, a global, a constructor, or a closure value
  const std::vector<Expr> args;
  const Attrs attrs;  ///< op calls only
};

class LetNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::let;
  LetNode(Expr v, Expr val, Expr b, SourceLoc l)
      : ExprNode(kKind, l), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Expr var;  ///< a Var
  const Expr value;
  const Expr body;
};

class IfNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::if_;
  IfNode(Expr c, Expr t, Expr e, SourceLoc l)
      : ExprNode(kKind, l), cond(std::move(c)), then_branch(std::move(t)), else_branch(std::move(e)) {}
  const Expr cond;  ///< a bool[] tensor
  const Expr then_branch;
  const Expr else_branch;
};

class TupleNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::tuple;
  TupleNode(std::vector<Expr> f, SourceLoc l) : ExprNode(kKind, l), fields(std::move(f)) {}
  const std::vector<Expr> fields;
};

class TupleGetNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::tuple_get;
  TupleGetNode(Expr t, std::uint32_t i, SourceLoc l)
      : ExprNode(kKind, l), tuple(std::move(t)), index(i) {}
  const Expr tuple;
  const std::uint32_t index;
};

/// A function: the body of a global, or a closure (it captures the free
/// variables of its body).
class FunctionNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::function;
  FunctionNode(std::vector<Expr> p, Type r, Expr b, SourceLoc l, bool prim = false)
      : ExprNode(kKind, l),
        params(std::move(p)),
        ret_type(std::move(r)),
        body(std::move(b)),
        primitive(prim) {}
  const std::vector<Expr> params;  ///< Vars, each with a type annotation
  const Type ret_type;             ///< declared return type; undefined = inferred
  const Expr body;
  /// A fused group of ops (made by the fuse_ops pass, printed `primitive fn`):
  /// its body is lets of op calls on its parameters and scalar constants, it
  /// captures nothing, and a compiler runs it as one kernel.
  const bool primitive;
};

// --- Patterns --------------------------------------------------------------------

enum class PatternKind : std::uint8_t { wildcard, var, constructor, tuple };

class PatternNode : public RefCounted {
 public:
  static constexpr bool kDeferredTeardown = true;
  const PatternKind kind;
  virtual ~PatternNode() = default;

 protected:
  explicit PatternNode(PatternKind k) : kind(k) {}
};

class Pattern {
 public:
  Pattern() = default;
  explicit Pattern(Ref<const PatternNode> node) : node_(std::move(node)) {}
  [[nodiscard]] bool defined() const noexcept { return static_cast<bool>(node_); }
  [[nodiscard]] PatternKind kind() const noexcept { return node_->kind; }
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  Ref<const PatternNode> node_;
};

class PatternWildcardNode final : public PatternNode {
 public:
  static constexpr PatternKind kKind = PatternKind::wildcard;
  PatternWildcardNode() : PatternNode(kKind) {}
};

/// Binds the matched value to `var`.
class PatternVarNode final : public PatternNode {
 public:
  static constexpr PatternKind kKind = PatternKind::var;
  explicit PatternVarNode(Expr v) : PatternNode(kKind), var(std::move(v)) {}
  const Expr var;
};

/// Matches constructor `ctor` and its fields against `fields`.
class PatternConstructorNode final : public PatternNode {
 public:
  static constexpr PatternKind kKind = PatternKind::constructor;
  PatternConstructorNode(Expr c, std::vector<Pattern> f)
      : PatternNode(kKind), ctor(std::move(c)), fields(std::move(f)) {}
  const Expr ctor;  ///< a Constructor
  const std::vector<Pattern> fields;
};

class PatternTupleNode final : public PatternNode {
 public:
  static constexpr PatternKind kKind = PatternKind::tuple;
  explicit PatternTupleNode(std::vector<Pattern> f) : PatternNode(kKind), fields(std::move(f)) {}
  const std::vector<Pattern> fields;
};

struct Clause {
  Pattern pattern;
  Expr body;
};

class MatchNode final : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::match;
  MatchNode(Expr v, std::vector<Clause> c, SourceLoc l)
      : ExprNode(kKind, l), value(std::move(v)), clauses(std::move(c)) {}
  const Expr value;
  const std::vector<Clause> clauses;  ///< tried in order; the first that matches wins
};

// --- Constructors (checked: each names what is wrong in an Error) ------------------
[[nodiscard]] Expr var(std::string name, Type annotation = {}, SourceLoc loc = {});
[[nodiscard]] Expr constant(Tensor value, SourceLoc loc = {});
[[nodiscard]] Expr global_var(std::string name, SourceLoc loc = {});
[[nodiscard]] Expr op_ref(const OpDef& op, SourceLoc loc = {});
[[nodiscard]] Expr constructor(AdtDef adt, std::string_view name, SourceLoc loc = {});
[[nodiscard]] Expr call(Expr callee, std::vector<Expr> args, Attrs attrs = {}, SourceLoc loc = {});
[[nodiscard]] Expr let(Expr var, Expr value, Expr body, SourceLoc loc = {});
[[nodiscard]] Expr if_then_else(Expr cond, Expr then_branch, Expr else_branch, SourceLoc loc = {});
[[nodiscard]] Expr tuple(std::vector<Expr> fields, SourceLoc loc = {});
[[nodiscard]] Expr tuple_get(Expr tuple, std::uint32_t index, SourceLoc loc = {});
[[nodiscard]] Expr function(std::vector<Expr> params, Type ret_type, Expr body, SourceLoc loc = {},
                            bool primitive = false);
[[nodiscard]] Expr match(Expr value, std::vector<Clause> clauses, SourceLoc loc = {});
[[nodiscard]] Pattern pattern_wildcard();
[[nodiscard]] Pattern pattern_var(Expr var);
[[nodiscard]] Pattern pattern_constructor(Expr ctor, std::vector<Pattern> fields);
[[nodiscard]] Pattern pattern_tuple(std::vector<Pattern> fields);

}  // namespace nimble::ir
