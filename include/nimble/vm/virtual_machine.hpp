// The virtual machine: runs an Executable's bytecode, calling kernels for
// primitive functions. Cheap to create; one per thread over a shared
// Executable. Not thread-safe itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nimble/runtime/value.hpp"
#include "nimble/vm/executable.hpp"

namespace nimble::vm {

/// What the profiler measured (see VirtualMachine::set_profiling).
struct Profile {
  struct Primitive {
    std::string name;
    std::uint64_t calls = 0;
    std::uint64_t nanoseconds = 0;
  };
  struct InstructionClass {
    std::string name;  ///< an opcode name
    std::uint64_t count = 0;
  };
  std::vector<Primitive> primitives;           ///< every primitive called, by time
  std::vector<InstructionClass> instructions;  ///< every opcode executed, by count
  std::uint64_t total_nanoseconds = 0;         ///< time inside invoke()

  /// A markdown table of both.
  [[nodiscard]] std::string table() const;
};

/// The memory an invoke's values held (see VirtualMachine::set_memory_tracing),
/// measured before every instruction. Both leave out the constants and the
/// caller's arguments (weights and inputs), and the scratch a kernel uses
/// inside one call.
struct MemoryTrace {
  /// The most bytes of storage held at once: each storage that a register,
  /// or a tuple, ADT or closure in one, refers to, counted once at its
  /// allocated size (an arena of planned buffers whole).
  std::uint64_t activation_peak_bytes = 0;
  /// The most bytes of tensor data live at once: the union of the byte
  /// ranges of the tensors referred to. As compiled code drops each value
  /// right after its last use, this is the liveness lower bound of the
  /// program (an argument of a call lives until the call returns); the
  /// ratio of the two is what memory planning wastes.
  std::uint64_t activation_lower_bound_bytes = 0;
};

class VirtualMachine {
 public:
  explicit VirtualMachine(Executable executable);
  ~VirtualMachine();
  VirtualMachine(VirtualMachine&&) noexcept;
  VirtualMachine& operator=(VirtualMachine&&) noexcept;

  /// Runs entry point `function` on `args` and returns its result. Arguments
  /// are checked against the declared types first, with the reference
  /// interpreter's messages (Error(type_error) naming the function, the
  /// argument, and expected vs actual type). Kernel errors (an index out of
  /// range, a division by zero) are Errors naming the primitive. The
  /// arguments are never modified, nor copied: the call reads them in place.
  [[nodiscard]] Value invoke(std::string_view function, std::span<const Value> args);
  /// invoke(function, {x, w, bias}).
  [[nodiscard]] Value invoke(std::string_view function, std::initializer_list<Value> args) {
    return invoke(function, std::span<const Value>(args.begin(), args.size()));
  }

  /// The default limit on nested (non-tail) calls: a recursive model over a
  /// tree a million levels deep runs. Frames live on the heap, not on the
  /// C++ stack, so the limit is one of memory, about 100 bytes a frame plus
  /// its registers.
  static constexpr std::size_t kDefaultMaxCallDepth = std::size_t{1} << 22;
  /// Sets the limit on nested calls: an invoke that would nest deeper ends
  /// with Error(resource_exhausted) naming the limit, and the VM stays
  /// usable. `frames` >= 1.
  void set_max_call_depth(std::size_t frames);

  /// Turns the profiler on or off (off by default: then it costs one branch
  /// per kernel call and nothing per instruction). Turning it on resets it.
  void set_profiling(bool on);
  [[nodiscard]] Profile profile() const;

  /// Turns memory tracing on or off (off by default; on, every instruction
  /// walks the registers of all frames: for measuring, not for serving).
  /// Turning it on resets the trace; each invoke adds to its maxima.
  void set_memory_tracing(bool on);
  [[nodiscard]] MemoryTrace memory_trace() const;

  /// Takes every kernel from the provider called `provider` ("jit",
  /// "reference") instead of the first one that serves it; empty (the
  /// default) restores that. Kernels already used are dropped.
  void set_kernel_provider(std::string provider);

  [[nodiscard]] const Executable& executable() const noexcept;

 private:
  Value invoke_checked(std::string_view function, std::span<const Value> args);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nimble::vm
