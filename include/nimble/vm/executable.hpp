// A compiled module: bytecode for the VM, its constants, function table and
// the table of primitive functions (kernels are not inside: see
// nimble/runtime/kernel.hpp). Immutable once built and shared between
// threads; copying an Executable copies a handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::vm {

struct ExecutableData;  // lib/vm/executable_data.hpp
struct FunctionIndex;   // lib/vm/executable.cpp

class Executable {
 public:
  /// Reads an Executable saved by save(). The bytes are verified completely —
  /// header, version, checksum, every section's bounds, and the bytecode
  /// (register, jump, function, constant, primitive and pool indices all in
  /// range) — so a corrupt or truncated input is an Error(parse_error), never
  /// a crash.
  [[nodiscard]] static Executable load(std::span<const std::byte> bytes);
  [[nodiscard]] static Executable load_file(const std::string& path);
  /// A self-contained binary image: versioned header and checksum.
  [[nodiscard]] std::vector<std::byte> save() const;
  void save_file(const std::string& path) const;

  /// A readable listing of every function's bytecode, constants and primitives.
  [[nodiscard]] std::string disassemble() const;
  /// The names of the functions the host may invoke.
  [[nodiscard]] std::vector<std::string> entry_points() const;
  /// The tag of constructor `constructor` of ADT `adt` (for Value::adt: a
  /// host that has no ir::Module, running a loaded artifact, builds its
  /// List and Tree arguments so). Throws Error(invalid_argument) if the
  /// executable has no such constructor.
  [[nodiscard]] std::uint32_t constructor_tag(std::string_view adt, std::string_view constructor) const;

  /// For the VM and the compiler: wraps verified data.
  explicit Executable(std::shared_ptr<const ExecutableData> data);
  [[nodiscard]] const ExecutableData& data() const noexcept { return *data_; }
  /// For the VM: the index of function `name` in data().functions, or -1.
  /// A hash lookup (built once per Executable, shared by its copies), so
  /// that invoking by name costs the same in a module of 100k functions.
  [[nodiscard]] std::int64_t find_function(std::string_view name) const noexcept;

 private:
  std::shared_ptr<const ExecutableData> data_;
  std::shared_ptr<const FunctionIndex> function_index_;
};

}  // namespace nimble::vm
