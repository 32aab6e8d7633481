// nimble's side of nimble/support/log.hpp.
#pragma once

#include <string_view>

#include "nimble/support/log.hpp"

namespace nimble::detail {

/// Sends `message` to the sink.
void log(LogLevel level, std::string_view message);
/// Sends `message` once per process (later calls with the same text are
/// dropped): for problems that would otherwise repeat on every call.
void warn_once(std::string_view message);

}  // namespace nimble::detail
