// The process's one LLVM ORC JIT for the host CPU: optimizes a module with the
// new pass manager for the host (its CPU and features: AVX-512 where there
// is one, AVX2 elsewhere, the baseline otherwise) and links it into memory.
// Thread-safe: kernels compile concurrently (each in its own LLVMContext);
// compiling (to an object file) and linking are separate steps, so that
// objects can be kept on disk and linked again by a later process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace nimble::codegen {

/// Machine code added to the JIT; freed when the last handle goes.
class JitCode {
 public:
  virtual ~JitCode() = default;
  /// The address of each symbol asked for, in order.
  [[nodiscard]] virtual const std::vector<void*>& addresses() const noexcept = 0;
};

/// Optimizes `module` (of `context`) for the host and compiles it to a
/// relocatable object file, returned as its bytes. Throws
/// Error(runtime_error) naming the module if LLVM fails (an invalid module
/// is a bug, reported the same way).
[[nodiscard]] std::string compile_to_object(std::unique_ptr<llvm::LLVMContext> context,
                                            std::unique_ptr<llvm::Module> module);

/// A CPU that objects are compiled for ahead of time.
struct ObjectTarget {
  std::string cpu;       ///< an LLVM CPU name: the host's, "x86-64-v3", "x86-64"
  std::string features;  ///< an LLVM feature string ("+avx2,+fma,-avx512f"); may be empty
};

/// What the JIT itself compiles for: the host's CPU and features.
[[nodiscard]] ObjectTarget jit_object_target();

/// The width of `target`'s widest vector registers for floats: 512 with
/// AVX-512, 256 with AVX, else 128. Throws Error(runtime_error) if LLVM
/// does not know the CPU.
[[nodiscard]] unsigned vector_bits(const ObjectTarget& target);

/// compile_to_object for `target` instead of the host, as position-
/// independent code for a shared object. Throws Error(runtime_error) if
/// LLVM does not know the CPU or fails.
[[nodiscard]] std::string compile_to_pic_object(std::unique_ptr<llvm::LLVMContext> context,
                                                std::unique_ptr<llvm::Module> module, const ObjectTarget& target);

/// Links `object` (from compile_to_object, in this process or an earlier
/// one) into the JIT, in a JITDylib of its own, and returns the addresses
/// of `symbols`. Throws Error(runtime_error) naming `name` if it fails.
[[nodiscard]] std::unique_ptr<JitCode> jit_link(std::string_view name, std::string_view object,
                                                std::span<const std::string> symbols);

/// What the JIT compiles for: triple, CPU and features (objects are only
/// valid on the same; it keys the disk cache).
[[nodiscard]] const std::string& jit_target_id();

/// A process-unique prefix for a kernel's symbols, e.g. "nimble_k17".
[[nodiscard]] std::string unique_symbol_prefix();

}  // namespace nimble::codegen
