#include "runtime/background_compiler.hpp"

#include <atomic>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include <unistd.h>

#ifdef NIMBLE_TSAN
#include <thread>
#else
#include <tbb/task_arena.h>
#endif

#include "nimble/runtime/kernel.hpp"
#include "runtime/stats_counters.hpp"
#include "runtime/trace.hpp"

namespace nimble {

struct BackgroundCompiler::Impl {
  std::mutex mutex;
  std::condition_variable idle;
  std::uint64_t pending = 0;  // guarded by mutex
  std::atomic<std::uint64_t> pending_now{0};

  // Called at the end of each task.
  void finished() {
    stats::count_specialization_pending(-1);
    std::lock_guard lock(mutex);
    pending_now.store(--pending, std::memory_order_relaxed);
    if (pending == 0) idle.notify_all();
  }
  void started() {
    stats::count_specialization_pending(+1);
    std::lock_guard lock(mutex);
    pending_now.store(++pending, std::memory_order_relaxed);
  }

#ifdef NIMBLE_TSAN
  std::deque<std::function<void()>> queue;  // guarded by mutex
  std::condition_variable work;
  void start() {
    // Detached: the process's compiler is never destroyed, and at exit
    // wait() has left it idle.
    std::thread([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock lock(mutex);
          work.wait(lock, [this] { return !queue.empty(); });
          task = std::move(queue.front());
          queue.pop_front();
        }
        trace::name_thread("nimble background compiler");
        task();
        task = nullptr;  // drops what it holds before it counts as done
        finished();
      }
    }).detach();
  }
  void submit(std::function<void()> task) {
    started();
    try {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(task));
    } catch (...) {
      finished();
      throw;
    }
    work.notify_one();
  }
#else
  // One slot, none reserved for application threads: a TBB worker runs the
  // tasks (oneTBB grants an arena with enqueued work a worker even when
  // global_control limits the process to one thread).
  tbb::task_arena arena{1, 0, tbb::task_arena::priority::low};
  void submit(std::function<void()> task) {
    // (oneTBB calls a task as const: the function is held by pointer.)
    auto held = std::make_shared<std::function<void()>>(std::move(task));
    started();
    try {
      arena.enqueue([this, held] {
        trace::name_thread("nimble background compiler");
        (*held)();
        *held = nullptr;  // drops what it holds before it counts as done
        finished();
      });
    } catch (...) {
      finished();
      throw;
    }
  }
  void start() {}
#endif

  void wait() {
    std::unique_lock lock(mutex);
    idle.wait(lock, [this] { return pending == 0; });
  }
};

BackgroundCompiler::BackgroundCompiler() : impl_(std::make_unique<Impl>()) { impl_->start(); }

BackgroundCompiler& BackgroundCompiler::process() {
  static BackgroundCompiler* const compiler = [] {
    // At exit, handlers and static destructors run in the reverse order of
    // their registration: what the tasks use must be constructed before the
    // wait is registered, so that it is destroyed only after the wait. The
    // runtime's statics are made here; the code generator's never die.
    (void)KernelCache::global();
    stats::count_specialization_pending(0);
    auto* c = new BackgroundCompiler();
    std::atexit([] { process().wait(); });
    return c;
  }();
  return *compiler;
}

namespace {

// Waits for the background tasks when the main thread exits. exit() runs
// the exiting thread's thread_local destructors before any atexit handler
// or static destructor, so this wait comes before LLVM's function-local
// statics go — also those a compilation made after process() registered its
// own wait, which exit would destroy first (a task still compiling then
// used destroyed LLVM state: SIGSEGV at exit). Main thread only: other
// threads' exits need not wait, and a oneTBB worker must not block on tasks
// that may need it.
struct DrainAtMainThreadExit {
  DrainAtMainThreadExit() = default;
  DrainAtMainThreadExit(const DrainAtMainThreadExit&) = delete;
  DrainAtMainThreadExit& operator=(const DrainAtMainThreadExit&) = delete;
  ~DrainAtMainThreadExit() { BackgroundCompiler::process().wait(); }
};

void drain_when_main_thread_exits() {
  static thread_local const bool main_thread = ::gettid() == ::getpid();
  if (!main_thread) return;
  static thread_local const DrainAtMainThreadExit drain;
  (void)drain;
}

}  // namespace

void BackgroundCompiler::submit(std::function<void()> task) {
  drain_when_main_thread_exits();
  impl_->submit(std::move(task));
}
void BackgroundCompiler::wait() { impl_->wait(); }
std::uint64_t BackgroundCompiler::pending() const noexcept {
  return impl_->pending_now.load(std::memory_order_relaxed);
}

}  // namespace nimble
