// The recording side of nimble/runtime/trace.hpp, for the code that emits
// events. Every hook first checks trace::recording(), one relaxed load, so
// that they cost nothing measurable while no trace records.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "nimble/runtime/trace.hpp"

namespace nimble::trace {

using Clock = std::chrono::steady_clock;

extern std::atomic<bool> g_recording;
[[nodiscard]] inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }

/// A complete event `name` of category `category` from `start` to `end` on
/// the calling thread. `args_json` is the body of its "args" object
/// (`"key": value, ...`, already JSON) or empty. Out of memory, the event
/// is lost (never the work it describes).
void complete(std::string_view name, std::string_view category, Clock::time_point start, Clock::time_point end,
              std::string_view args_json = {}) noexcept;
/// Names the calling thread's track (once per thread and trace).
void name_thread(std::string_view name) noexcept;
/// `text` as a JSON string literal, quotes included.
[[nodiscard]] std::string quoted(std::string_view text);

}  // namespace nimble::trace
