// An IR module: ADT definitions, global functions and entry points, plus the
// module-level services: printing and parsing of the text form, the verifier
// and type inference.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/ir/expr.hpp"

namespace nimble::ir {

/// A value type (copying a Module copies its tables, not the IR nodes).
/// Definition order is kept: printing lists ADTs, then functions, in the
/// order they were added. Lookups by name are hash-table lookups, so a
/// module of a hundred thousand functions builds in linear time.
class Module {
 public:
  /// Adds an ADT definition; Error(invalid_argument) if the name is taken.
  void add_adt(AdtDef adt);
  /// Adds a global function (a Function expression); Error(invalid_argument)
  /// if the name is taken or `function` is not a Function.
  void add_function(std::string name, Expr function);
  /// Replaces the body of an existing global (passes use this).
  void update_function(std::string_view name, Expr function);
  /// Marks `name` as an entry point (callable from the host).
  void add_entry(std::string name);

  [[nodiscard]] AdtDef find_adt(std::string_view name) const noexcept;
  /// The Function of global `name`; undefined if there is none.
  [[nodiscard]] Expr find_function(std::string_view name) const noexcept;
  /// The constructor `name` of any ADT, with its ADT; {null, -1} if none.
  [[nodiscard]] std::pair<AdtDef, int> find_constructor(std::string_view name) const noexcept;

  [[nodiscard]] const std::vector<AdtDef>& adts() const noexcept { return adts_; }
  [[nodiscard]] const std::vector<std::pair<std::string, Expr>>& functions() const noexcept {
    return functions_;
  }
  [[nodiscard]] const std::vector<std::string>& entries() const noexcept { return entries_; }
  [[nodiscard]] bool is_entry(std::string_view name) const noexcept;

 private:
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  /// name -> index (into adts_, functions_, entries_; for constructors, the
  /// ADT's index and the tag).
  template <class V>
  using NameMap = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

  std::vector<AdtDef> adts_;
  std::vector<std::pair<std::string, Expr>> functions_;
  std::vector<std::string> entries_;
  NameMap<std::size_t> adt_index_;
  NameMap<std::size_t> function_index_;
  NameMap<std::pair<std::size_t, int>> constructor_index_;
  NameMap<std::size_t> entry_index_;
};

// --- Text form ---------------------------------------------------------------------

struct PrintOptions {
  /// Append each let's inferred type as a comment ("// f32[?, 512]"), and
  /// each function's inferred type after its header, when inference has run.
  bool show_types = false;
};

/// The module as IR text. print(parse(print(m))) == print(m).
[[nodiscard]] std::string print(const Module& module, const PrintOptions& options = {});
/// One expression as IR text (for messages and tests).
[[nodiscard]] std::string print(const Expr& expr, const PrintOptions& options = {});
/// Parses IR text. A syntax error is Error(parse_error) naming
/// "<file>:<line>:<column>", what was expected and what was found. Nodes
/// record their position; `file_name` must outlive the module (a literal).
[[nodiscard]] Module parse(std::string_view text, const char* file_name = "<text>");

// --- Checks --------------------------------------------------------------------------

/// Checks that the module is well formed: every variable is bound before use
/// and bound once, calls have the callee's arity, constructors and patterns
/// match their ADT, globals and ADTs referenced exist, entry points exist.
/// Throws Error(invalid_argument) naming the first problem and where it was built.
void verify(const Module& module);

/// Infers the type of every expression (stored in checked_type), checking
/// each op's type relation and each call's argument types. A function whose
/// return type is not declared gets the inferred one; a recursive function
/// must declare it. Throws Error(type_error) naming the expression, the
/// expected and actual types, and where it was built.
void infer_types(const Module& module);

}  // namespace nimble::ir
