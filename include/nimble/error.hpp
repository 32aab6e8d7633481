// nimble::Error: the one exception type nimble raises for user errors.
//
// Every bad input that reaches nimble's API (a wrong shape, dtype or arity,
// malformed IR text, a corrupt cache file, a failed JIT, a missing GPU) is
// reported as an Error whose message names what was expected and what came.
// Internal bugs are not Errors: they are assertions (see lib/support/check.hpp).
// An error path never modifies or frees anything the caller passed in.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace nimble {

/// What kind of user error an Error reports; lets callers and tests react
/// without matching message text.
enum class ErrorKind : std::uint8_t {
  invalid_argument,  ///< a value the API cannot accept (negative dim, size mismatch)
  out_of_range,      ///< an index or axis outside its bounds
  type_error,        ///< a dtype, shape or IR type that does not match what is required
  parse_error,       ///< malformed text (IR, options)
  not_supported,     ///< a capability nimble does not have (yet); never computed silently
  runtime_error,     ///< a failure while running (failed JIT, device error, corrupt cache)
  resource_exhausted,  ///< a limit reached: memory, nesting depth, VM frames, a size a text or file asked for
};

/// Returns the lower-case name of `kind`, e.g. "type_error".
[[nodiscard]] std::string_view to_string(ErrorKind kind) noexcept;

/// A user error. Cheap to copy; safe to catch as std::exception.
class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message);

  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }
  /// The full message, including any context added on the way up.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }

  /// Prefixes `context` ("while compiling 'main'") to the message, separated by
  /// ": ". Returns *this so that a handler can `throw e.with_context(...)`.
  Error& with_context(std::string_view context);

 private:
  ErrorKind kind_;
  std::string message_;
};

}  // namespace nimble
