// Where nimble's log lines go. nimble logs rarely, and only what a user
// should act on: a kernel past its shape-bucket limit (slower calls), a disk
// cache it will not use. By default each line goes to stderr as
// "nimble: warning: <message>"; a host that has its own logging installs a
// sink.
//
// Thread safety: set_log_sink may be called at any time from any thread;
// when it returns, no thread is still in the sink it replaced (so what that
// sink refers to may go). The sink is called from whichever thread logs (a
// background compilation included), possibly from several at once; it must
// not throw and must not call back into nimble (a line it logs goes to
// stderr; set_log_sink from inside it throws Error(invalid_argument)).
#pragma once

#include <functional>
#include <string_view>

namespace nimble {

enum class LogLevel { warning };

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

/// Sends every later log line to `sink`; an empty sink restores stderr.
void set_log_sink(LogSink sink);

}  // namespace nimble
