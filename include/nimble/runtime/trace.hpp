// Chrome traces of what nimble does: the JSON of the Trace Event Format that
// Perfetto (ui.perfetto.dev), chrome://tracing and speedscope open. While a
// trace records, nimble adds an event for each VM invocation, each kernel
// call (with its input shapes and its shape bucket), each kernel compilation
// (generic or specialized; background compilations on the compiler's own
// thread track), each kernel loaded from the disk cache, and each block the
// CPU allocator takes from the system. Every event is a complete event
// (ph "X") with ts and dur in microseconds, pid and tid; threads are named
// by metadata events.
//
// Setting NIMBLE_TRACE=<file.json> records from the start of the process
// and writes the file at exit. The examples take --trace <file.json>.
//
// Thread safety: every function may be called from any thread; events from
// all threads go into one trace. Recording costs a lock per event: it is for
// looking, not for serving.
#pragma once

#include <string>

namespace nimble {

/// Starts recording (drops what an earlier recording left unread).
void start_trace();
/// Whether a trace is recording.
[[nodiscard]] bool trace_recording() noexcept;
/// Stops recording and returns the trace, {"traceEvents": [...]}. An empty
/// trace if none was recording.
[[nodiscard]] std::string stop_trace();
/// Stops recording and writes the trace to `path`. Throws
/// Error(runtime_error) if the file cannot be written.
void stop_trace(const std::string& path);

}  // namespace nimble
