// The JIT as a KernelProvider: every compute primitive whose ops all have
// compute rules becomes a CPU kernel on first use — a generic one from
// get(), one per shape bucket from specialize() — loaded from the disk cache
// when it holds the kernel (KernelCacheOptions::disk_cache_dir), else
// compiled and stored there. Shape functions and primitives with an opaque
// op (nonzero, stack) are left to the reference provider, as is a rule the
// kernel IR cannot express yet (not_supported).
#include <memory>
#include <optional>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/kernel_store.hpp"
#include "codegen/primitive_rule.hpp"

namespace nimble::codegen {

namespace {

class JitProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "jit"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override { return kernel(prim, {}); }

  Ref<Kernel> specialize(const PrimitiveInfo& prim, const Bucket& bucket) override {
    return kernel(prim, bucket);
  }

 private:
  static Ref<Kernel> kernel(const PrimitiveInfo& prim, const Bucket& bucket) {
    const std::optional<PrimitiveRule> rule = primitive_rule(prim);
    if (!rule) return {};
    // A directory others can write is not used: its objects would run here.
    const std::string directory = KernelCache::global().options().disk_cache_dir;
    const std::optional<KernelStore> store = directory.empty() || !trusted_cache_directory(directory)
                                                 ? std::nullopt
                                                 : std::optional<KernelStore>(KernelStore(directory));
    try {
      return cpu_kernel(prim, *rule, bucket, store ? &*store : nullptr);
    } catch (Error& e) {
      if (e.kind() == ErrorKind::not_supported) return {};
      throw e.with_context(prim.name);
    }
  }
};

}  // namespace

void register_jit_provider() {
  KernelCache::global().add_provider(std::make_shared<JitProvider>(), 0);
}

}  // namespace nimble::codegen
