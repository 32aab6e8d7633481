// The JIT as a KernelProvider: every compute primitive whose ops all have
// compute rules becomes a CPU kernel on first use. Shape functions and
// primitives with an opaque op (nonzero, stack) are left to the reference
// provider, as is a rule the kernel IR cannot express yet (not_supported).
#include <memory>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/primitive_rule.hpp"

namespace nimble::codegen {

namespace {

class JitProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "jit"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    const std::optional<PrimitiveRule> rule = primitive_rule(prim);
    if (!rule) return {};
    try {
      return compile_cpu_kernel(prim.name, rule->inputs, rule->outputs);
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
