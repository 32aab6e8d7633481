#include "runtime/trace.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

#include "support/check.hpp"

namespace nimble {
namespace trace {

std::atomic<bool> g_recording{false};

namespace {

struct Recorder {
  std::mutex mutex;
  Clock::time_point origin;
  std::vector<std::string> events;  // each one JSON object
  std::uint64_t generation = 0;     // bumped by each start: threads name themselves again
};

// Never destroyed: background threads may record during exit.
Recorder& recorder() {
  static Recorder* const instance = new Recorder;
  return *instance;
}

std::uint64_t thread_number() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t number = next.fetch_add(1);
  return number;
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

void complete(std::string_view name, std::string_view category, Clock::time_point start, Clock::time_point end,
              std::string_view args_json) noexcept {
  if (!recording()) return;
  const std::uint64_t tid = thread_number();
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (!recording()) return;
  try {
    r.events.push_back(fmt::format(R"({{"name":{},"cat":{},"ph":"X","ts":{:.3f},"dur":{:.3f},"pid":{},"tid":{},"args":{{{}}}}})",
                                 quoted(name), quoted(category), micros(start - r.origin),
                                 micros(end - start), ::getpid(), tid, args_json));
  } catch (...) {  // out of memory: the trace loses the event, the work goes on
  }
}

void name_thread(std::string_view name) noexcept {
  if (!recording()) return;
  thread_local std::uint64_t named_in = 0;
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (!recording() || named_in == r.generation) return;
  named_in = r.generation;
  try {
    r.events.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","ts":0,"dur":0,"pid":{},"tid":{},"args":{{"name":{}}}}})",
                                 ::getpid(), thread_number(), quoted(name)));
  } catch (...) {
  }
}

}  // namespace trace

void start_trace() {
  trace::Recorder& r = trace::recorder();
  const std::lock_guard lock(r.mutex);
  r.events.clear();
  r.origin = trace::Clock::now();
  ++r.generation;
  trace::g_recording.store(true, std::memory_order_relaxed);
}

bool trace_recording() noexcept { return trace::recording(); }

std::string stop_trace() {
  trace::Recorder& r = trace::recorder();
  std::vector<std::string> events;
  {
    const std::lock_guard lock(r.mutex);
    trace::g_recording.store(false, std::memory_order_relaxed);
    events.swap(r.events);
  }
  std::string out = "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    out += events[i];
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

void stop_trace(const std::string& path) {
  const std::string json = stop_trace();
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << json;
  if (!file.good()) throw_error(ErrorKind::runtime_error, "stop_trace: cannot write {}", path);
}

namespace {
// NIMBLE_TRACE=<file>: record from the library's load, write at exit.
[[maybe_unused]] const bool g_trace_from_environment = [] {
  const char* path = std::getenv("NIMBLE_TRACE");
  if (path == nullptr || *path == '\0') return false;
  static const std::string file = path;
  start_trace();
  std::atexit([] {
    // Only the recording this started: a program that stopped it (and
    // perhaps wrote its own) keeps its file.
    if (!trace_recording()) return;
    try {
      stop_trace(file);
    } catch (const Error& e) {
      std::fprintf(stderr, "nimble: warning: NIMBLE_TRACE: %s\n", e.what());
    }
  });
  return true;
}();
}  // namespace

}  // namespace nimble
