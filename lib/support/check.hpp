// Internal helpers that separate user errors from bugs.
//
//  - throw_error(kind, fmt, args...): a user error; raises nimble::Error whose
//    message names what was expected and what came.
//  - NIMBLE_ASSERT(cond, msg): an internal invariant; a failure is a bug in
//    nimble, reported with file and line, and aborts (in every build type:
//    continuing past a broken invariant could corrupt the host's data).
#pragma once

#include <fmt/format.h>

#include <utility>

#include "nimble/error.hpp"

namespace nimble {

template <class... Args>
[[noreturn]] void throw_error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void assertion_failed(const char* condition, const char* message, const char* file,
                                   int line) noexcept;
}  // namespace detail

}  // namespace nimble

#define NIMBLE_ASSERT(condition, message)                                                  \
  do {                                                                                     \
    if (!(condition)) [[unlikely]]                                                         \
      ::nimble::detail::assertion_failed(#condition, (message), __FILE__, __LINE__);       \
  } while (false)
