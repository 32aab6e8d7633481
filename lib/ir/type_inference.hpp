// Type inference, usable whole-module (infer_types) and one expression at a
// time (the builder types every statement as it is built, so that a type
// error points at the C++ line that made it).
//
// Types live on the nodes (ExprNode::checked_type); a variable's type is its
// node's checked_type, set when it is bound. Unknown ADT type arguments
// (the T of `Nil`) are IncompleteTypes solved by joining; finalize() replaces
// them by what they resolved to.
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nimble/ir/module.hpp"

namespace nimble::ir {

using SymbolSet = std::set<std::string, std::less<>>;

class TypeInferencer {
 public:
  explicit TypeInferencer(const Module& module) : module_(module) {}

  /// Types `expr` and its sub-expressions; returns its type. Free variables
  /// must already be typed.
  Type infer(const Expr& expr);
  /// The type of global function `name`. A function with a declared return
  /// type gets its signature without inferring its body; one without is
  /// inferred now (and must not be recursive).
  Type global_type(const std::string& name, const Expr& at);
  /// Infers `function`, which is (about to be) global `name`; errors name it.
  Type infer_global_function(const Expr& function, const std::string& name) {
    return infer_function(function, *function.as<FunctionNode>(), "@" + name);
  }
  /// Infers the body of global `name` (once).
  void infer_global(const std::string& name);
  /// Records the signature of a global that is declared but not yet defined
  /// (the builder, for recursion).
  void declare_global(const std::string& name, Type signature) {
    global_types_[name] = std::move(signature);
  }
  /// Types the variables a pattern binds from the type of the matched value.
  void bind_pattern(const Pattern& pattern, const Type& type, const Expr& at);
  /// Whether `type` still contains an unsolved IncompleteType.
  [[nodiscard]] bool has_incomplete(const Type& type) const;
  /// `type` with every solved IncompleteType replaced by its solution.
  [[nodiscard]] Type resolve(const Type& type) const;
  /// Resolves the checked types of every node under `expr`; throws if an
  /// IncompleteType is left unsolved.
  void finalize(const Expr& expr);

  /// Least upper bound of two types (dims that differ become Any), solving
  /// IncompleteTypes on the way; throws Error(type_error) with `what` when the
  /// types cannot be joined (different dtypes, ranks or kinds).
  Type join(const Type& a, const Type& b, const Expr& at, const std::string& what);

 private:
  Type infer_node(const Expr& expr);
  Type infer_call(const Expr& expr, const CallNode& call);
  Type infer_function(const Expr& expr, const FunctionNode& fn, const std::string& what);
  Type infer_match(const Expr& expr, const MatchNode& match);
  Type instantiate_constructor(const ConstructorNode& ctor, std::vector<Type>& field_types);
  Type fresh();
  Type bind_var(const Expr& var, const Type& value_type, const Expr& at);

  const Module& module_;
  std::unordered_map<const TypeNode*, Type> solutions_;  // IncompleteType -> type
  // Every unknown made by fresh(), kept alive as long as solutions_ may name
  // it: a freed node's address could be reused by a new unknown, which would
  // then inherit the old one's solution.
  std::vector<Type> unknowns_;
  std::unordered_map<std::string, Type> global_types_;
  std::unordered_set<std::string> in_progress_;
  std::unordered_set<std::string> inferred_;
  SymbolSet rigid_symbols_;  // of the parameters of the functions being inferred
  std::uint32_t next_incomplete_ = 0;
};

/// "(in `<expr>`, built at <loc>)" for error messages: the expression's first
/// line of IR text and, when known, where it was built.
[[nodiscard]] std::string describe_site(const Expr& expr);

}  // namespace nimble::ir
