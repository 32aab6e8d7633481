#include "nimble/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "support/check.hpp"

namespace nimble {

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::out_of_range: return "out_of_range";
    case ErrorKind::type_error: return "type_error";
    case ErrorKind::parse_error: return "parse_error";
    case ErrorKind::not_supported: return "not_supported";
    case ErrorKind::runtime_error: return "runtime_error";
    case ErrorKind::resource_exhausted: return "resource_exhausted";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

Error& Error::with_context(std::string_view context) {
  message_ = fmt::format("{}: {}", context, message_);
  return *this;
}

namespace detail {
void assertion_failed(const char* condition, const char* message, const char* file,
                      int line) noexcept {
  std::fprintf(stderr, "nimble internal error at %s:%d: %s (failed: %s)\n", file, line, message,
               condition);
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace nimble
