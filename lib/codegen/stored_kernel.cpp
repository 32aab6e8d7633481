#include "codegen/stored_kernel.hpp"

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>

#include <optional>

#include "codegen/kernel_store.hpp"
#include "nimble/version.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

std::string kernel_identity(std::string_view code, const PrimitiveInfo& prim, std::string_view bucket) {
  return fmt::format("nimble {} build {}\nllvm {}\n{}\nbucket {}\n{} {}\n", kVersion, library_build_id(),
                     LLVM_VERSION_STRING, code, bucket,
                     prim.kind == PrimitiveKind::compute ? "compute" : "shape_function", prim.source);
}

Ref<Kernel> load_stored_kernel(const KernelStore* store, std::uint64_t key, std::string_view identity,
                               std::chrono::steady_clock::time_point start,
                               const std::function<Ref<Kernel>(std::string_view payload)>& load) {
  if (store == nullptr) return {};
  const std::optional<std::string> payload = store->load(key, identity);
  if (!payload) return {};
  Ref<Kernel> kernel;
  try {
    kernel = load(*payload);
  } catch (const Error&) {
    // Code LLVM cannot link, a PTX the driver rejects: rejected like a
    // corrupt file (the caller compiles and stores the kernel again).
  }
  if (kernel)
    stats::count_disk_hit(stats::nanoseconds_since(start));
  else
    stats::count_disk_rejected();
  return kernel;
}

}  // namespace nimble::codegen
