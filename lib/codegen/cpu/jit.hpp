// The process's one LLVM ORC JIT for the host CPU: optimizes a module with the
// new pass manager for the host (its CPU and features: AVX-512 where there
// is one, AVX2 elsewhere, the baseline otherwise) and links it into memory.
// Thread-safe: kernels compile concurrently (each in its own LLVMContext).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
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

/// Optimizes `module` (of `context`) and compiles it, returning the
/// addresses of `symbols`. Throws Error(runtime_error) naming the module if
/// LLVM fails (an invalid module is a bug, reported the same way).
[[nodiscard]] std::unique_ptr<JitCode> jit_compile(std::unique_ptr<llvm::LLVMContext> context,
                                                   std::unique_ptr<llvm::Module> module,
                                                   std::span<const std::string> symbols);

/// A process-unique prefix for a kernel's symbols, e.g. "nimble_k17".
[[nodiscard]] std::string unique_symbol_prefix();

}  // namespace nimble::codegen
