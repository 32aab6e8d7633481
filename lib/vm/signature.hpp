// Declared types as the runtime sees them: the VM checks a call's arguments
// against its entry's signature without the compiler's IR (the runtime never
// depends on lib/ir). The compiler converts ir::Type into TypeDesc
// (lib/compiler/bytecode/signature_from_ir.cpp); the reference interpreter checks
// through the same ArgumentChecker, so both engines reject a bad argument with
// the same message.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "nimble/runtime/dtype.hpp"
#include "nimble/runtime/value.hpp"

namespace nimble::vm {

/// A dimension: fixed, Any, or a symbol with an optional upper bound (-1: none).
struct DimDesc {
  enum class Kind : std::uint8_t { fixed, any, symbol };
  Kind kind = Kind::any;
  std::int64_t value = 0;  // fixed: the extent; symbol: the bound or -1
  std::string name;        // symbol only
  friend bool operator==(const DimDesc&, const DimDesc&) = default;
};

struct TypeDesc {
  enum class Kind : std::uint8_t { tensor, tuple, adt, type_var, func };
  Kind kind = Kind::tensor;
  DType dtype = DType::f32;       // tensor
  std::vector<DimDesc> dims;      // tensor
  std::vector<TypeDesc> fields;   // tuple fields, ADT type arguments, func params + result
  std::string name;               // ADT or type variable name
  friend bool operator==(const TypeDesc&, const TypeDesc&) = default;
};

struct ConstructorDesc {
  std::string name;
  std::vector<TypeDesc> fields;
  friend bool operator==(const ConstructorDesc&, const ConstructorDesc&) = default;
};

struct AdtDesc {
  std::string name;
  std::vector<std::string> type_params;
  std::vector<ConstructorDesc> constructors;  // in tag order
  friend bool operator==(const AdtDesc&, const AdtDesc&) = default;
};

/// The text of the IR printer: "f32[?, 1, n<=512]", "(f32[2], i64[])",
/// "List<f32[1, 512]>".
[[nodiscard]] std::string to_string(const TypeDesc& type);

/// Checks the arguments of one call of `function` in order. Symbols bind to
/// their first extent within the call and must agree afterwards.
/// What argument checks keep between calls of one VM, so that a warm call
/// allocates nothing: each ADT type as used by a signature (List<f32[4]>)
/// with its constructors' field types for that use, made on first need, and
/// the room for the symbols' values.
class ArgumentCheckCache {
 public:
  struct AdtUse {
    TypeDesc type;
    std::vector<std::vector<TypeDesc>> field_types;  // per constructor
  };

 private:
  friend class ArgumentChecker;
  std::deque<AdtUse> adt_uses_;  // a deque: references stay valid as it grows
  std::vector<std::pair<std::string_view, std::int64_t>> symbols_;
};

/// Checks host arguments against a signature; one per call. `cache` and the
/// TypeDescs passed to check() must outlive it (it keeps views of symbol names).
class ArgumentChecker {
 public:
  ArgumentChecker(std::span<const AdtDesc> adts, std::string_view function, ArgumentCheckCache& cache);

  /// Throws Error(type_error): "@f: argument 2 (%h) must be f32[1, 512], got f32[1, 7]".
  void check(std::size_t index, std::string_view param_name, const TypeDesc& type,
             const Value& value);

 private:
  bool fits(const TypeDesc& type, const Value& v, std::string& why);
  bool fits_tensor(const TypeDesc& type, const Value& v, std::string& why);
  bool fits_dim(const DimDesc& d, std::int64_t extent, std::string& why);
  const AdtDesc* find_adt(std::string_view name) const;
  const ArgumentCheckCache::AdtUse& adt_use(const TypeDesc& type, const AdtDesc& def);

  std::span<const AdtDesc> adts_;
  std::string_view function_;
  ArgumentCheckCache& cache_;
};

/// "f32[2, 3]", "a tuple of 2 fields", "a value of constructor #1", "a function".
[[nodiscard]] std::string describe(const Value& value);

}  // namespace nimble::vm
