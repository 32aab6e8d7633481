// Internal: where specialized kernels compile while inference goes on. One
// per KernelCache. By default a oneTBB task arena of one slot at low
// priority (so background compilation takes at most one thread from the
// process and never runs inside an inference's parallel loops); in
// ThreadSanitizer builds (NIMBLE_TSAN) a std::thread with a queue instead,
// because Debian's libtbb is not instrumented and TSan cannot see the
// hand-over of a task to a TBB worker.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace nimble {

class BackgroundCompiler {
 public:
  /// The process's one, never destroyed (its tasks hold kernels that hold
  /// it); at exit it waits for its tasks, before LLVM's statics go: when
  /// the main thread exits (from the first submit made on it), else from an
  /// atexit handler.
  [[nodiscard]] static BackgroundCompiler& process();

  BackgroundCompiler(const BackgroundCompiler&) = delete;
  BackgroundCompiler& operator=(const BackgroundCompiler&) = delete;

  /// Runs `task` later on a background thread. The task must not throw.
  /// Throws (std::bad_alloc) only if it could not be queued: then it never runs.
  void submit(std::function<void()> task);
  /// Blocks until every task submitted so far has finished.
  void wait();
  /// Tasks submitted and not finished.
  [[nodiscard]] std::uint64_t pending() const noexcept;

 private:
  BackgroundCompiler();
  ~BackgroundCompiler() = delete;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nimble
