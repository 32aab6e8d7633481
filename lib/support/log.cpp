#include "support/log.hpp"

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

namespace nimble {
namespace {

struct Logger {
  std::mutex mutex;
  std::shared_ptr<const LogSink> sink;  // null: stderr
  std::unordered_set<std::string> warned;
};

// Never destroyed: a background thread may log during exit.
Logger& logger() {
  static Logger* const instance = new Logger;
  return *instance;
}

}  // namespace

void set_log_sink(LogSink sink) {
  Logger& l = logger();
  auto installed = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  const std::lock_guard lock(l.mutex);
  l.sink = std::move(installed);
}

namespace detail {

void log(LogLevel level, std::string_view message) {
  Logger& l = logger();
  std::shared_ptr<const LogSink> sink;
  {
    const std::lock_guard lock(l.mutex);
    sink = l.sink;
  }
  if (sink) {
    (*sink)(level, message);
    return;
  }
  std::fprintf(stderr, "nimble: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

void warn_once(std::string_view message) {
  Logger& l = logger();
  {
    const std::lock_guard lock(l.mutex);
    if (!l.warned.emplace(message).second) return;
  }
  log(LogLevel::warning, message);
}

}  // namespace detail
}  // namespace nimble
