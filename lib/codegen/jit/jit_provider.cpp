// The JIT as a KernelProvider: every compute primitive whose ops all have
// compute rules becomes a CPU kernel on first use — a generic one from
// get(), one per shape bucket from specialize() — loaded from the disk cache
// when it holds the kernel (KernelCacheOptions::disk_cache_dir), else
// compiled and stored there. Shape functions and primitives with an opaque
// op (nonzero, stack) are left to the reference provider, as is a rule the
// kernel IR cannot express yet (not_supported). A primitive placed on a GPU
// becomes a GPU kernel (cuda_kernel: generic, or per bucket) on that
// device's context; what cannot become one is an Error here (the reference
// kernels read host memory).
#include "codegen/jit/jit_provider.hpp"

#include <memory>
#include <optional>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/kernel_store.hpp"
#include "codegen/primitive_rule.hpp"
#include "runtime/cuda/allocator.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

namespace {

class JitProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "jit"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override { return any_kernel(prim, {}); }
  Ref<Kernel> specialize(const PrimitiveInfo& prim, const Bucket& bucket) override { return any_kernel(prim, bucket); }

 private:
  // A GPU kernel for a primitive whose memory the host cannot read (a
  // GPU's), else a CPU kernel. Throws Error(not_supported) when the process
  // has no driver or no such device.
  static Ref<Kernel> any_kernel(const PrimitiveInfo& prim, const Bucket& bucket) {
    if (!prim.device.is_cpu())
      if (Allocator& memory = allocator_for(prim.device); !memory.host_accessible())
        return gpu_kernel(prim, memory, bucket);
    return kernel(prim, bucket);
  }

  // The disk cache, if there is one to use. A directory others can write is
  // not used: its objects would run here.
  static std::optional<KernelStore> disk_store() {
    const KernelCacheOptions& options = KernelCache::global().options();
    const std::string& directory = options.disk_cache_dir;
    if (directory.empty() || !trusted_cache_directory(directory)) return std::nullopt;
    return KernelStore(directory, options.disk_cache_max_bytes);
  }

  static Ref<Kernel> kernel(const PrimitiveInfo& prim, const Bucket& bucket) {
    const std::optional<PrimitiveRule> rule = primitive_rule(prim);
    if (!rule) return {};
    const std::optional<KernelStore> store = disk_store();
    try {
      return cpu_kernel(prim, *rule, bucket, store ? &*store : nullptr);
    } catch (Error& e) {
      if (e.kind() == ErrorKind::not_supported) return {};
      throw e.with_context(prim.name);
    }
  }

  // A kernel on the GPU whose memory `memory` is, generic or specialized
  // for `bucket`, from the disk cache when it holds it. Nothing else can
  // serve such a primitive — the reference kernels read host memory — so
  // what the GPU code generator cannot do is an Error here, naming why.
  static Ref<Kernel> gpu_kernel(const PrimitiveInfo& prim, Allocator& memory, const Bucket& bucket) {
    auto* gpu = dynamic_cast<cuda::DeviceAllocator*>(&memory);
    if (gpu == nullptr)
      throw_error(ErrorKind::not_supported, "not supported: {} on {}: no code generator for its memory", prim.name,
                  to_string(prim.device));
    const std::optional<PrimitiveRule> rule = primitive_rule(prim);
    if (!rule)
      throw_error(ErrorKind::not_supported,
                  "not supported: {} on {}: an op of it has no compute rule (its reference kernel runs on the CPU "
                  "only)",
                  prim.name, to_string(prim.device));
    try {
      const std::optional<KernelStore> store = disk_store();
      return cuda_kernel(prim, *rule, bucket, gpu->shared_context(), store ? &*store : nullptr);
    } catch (Error& e) {
      throw e.with_context(prim.name);
    }
  }
};

}  // namespace

std::shared_ptr<KernelProvider> make_jit_provider() { return std::make_shared<JitProvider>(); }

void register_jit_provider() { KernelCache::global().add_provider(make_jit_provider(), 0); }

}  // namespace nimble::codegen
