#include "support/log.hpp"

#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>

#include "support/check.hpp"

namespace nimble {
namespace {

struct Logger {
  // Held shared while a sink runs, exclusively while one is installed: once
  // set_log_sink returns, no thread is still in the sink it replaced.
  std::shared_mutex calling;
  std::unique_ptr<const LogSink> sink;  // null: stderr
  std::mutex warned_mutex;
  std::unordered_set<std::string> warned;
};

// Never destroyed: a background thread may log during exit.
Logger& logger() {
  static Logger* const instance = new Logger;
  return *instance;
}

}  // namespace

namespace {
// Set while this thread runs the sink: a sink that logs (or sets a sink)
// would take the lock it holds. Its own lines go to stderr instead.
thread_local bool g_in_sink = false;
}  // namespace

void set_log_sink(LogSink sink) {
  if (g_in_sink)
    throw_error(ErrorKind::invalid_argument, "set_log_sink: called from inside the log sink");
  Logger& l = logger();
  auto installed = sink ? std::make_unique<const LogSink>(std::move(sink)) : nullptr;
  const std::unique_lock lock(l.calling);
  l.sink.swap(installed);
}

namespace detail {

void log(LogLevel level, std::string_view message) {
  Logger& l = logger();
  if (!g_in_sink) {
    const std::shared_lock lock(l.calling);
    if (l.sink) {
      g_in_sink = true;
      struct Leave {
        ~Leave() { g_in_sink = false; }
      } leave;
      (*l.sink)(level, message);
      return;
    }
  }
  std::fprintf(stderr, "nimble: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

void warn_once(std::string_view message) {
  Logger& l = logger();
  {
    const std::lock_guard lock(l.warned_mutex);
    if (!l.warned.emplace(message).second) return;
  }
  log(LogLevel::warning, message);
}

}  // namespace detail
}  // namespace nimble
