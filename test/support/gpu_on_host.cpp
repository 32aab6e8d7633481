#include "support/gpu_on_host.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/jit/jit_provider.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/primitive_rule.hpp"

namespace nimble::testing {

namespace {

struct HostStages {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const codegen::HostCode>, std::less<>> by_prefix;
};

HostStages& host_stages() {
  static HostStages stages;
  return stages;
}

// Threads of the grid the host code simulates; 0 while no GpuOnHost lives.
std::atomic<unsigned> g_threads{0};

// Asked before the JIT: for a GPU primitive, compiles its host stages
// (generic, or specialized for the bucket asked for) under the JIT's entry
// names, then serves the JIT's kernel — so that the JIT's specializations of
// it come here too. Declines everything else.
class HostStagesProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "gpu-on-host"; }
  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    return add_stages(prim, {}) ? jit_->get(prim) : Ref<Kernel>{};
  }
  Ref<Kernel> specialize(const PrimitiveInfo& prim, const Bucket& bucket) override {
    return add_stages(prim, bucket) ? jit_->specialize(prim, bucket) : Ref<Kernel>{};
  }

 private:
  static bool add_stages(const PrimitiveInfo& prim, const Bucket& bucket) {
    const unsigned threads = g_threads.load();
    if (threads == 0 || prim.device.is_cpu() || allocator_for(prim.device).host_accessible()) return false;
    const std::optional<codegen::PrimitiveRule> rule = codegen::primitive_rule(prim);
    if (!rule) return false;
    codegen::KernelIR ir = codegen::lower_to_kernel_ir(prim.name, rule->inputs, rule->outputs);
    if (!bucket.dims.empty()) codegen::specialize(ir, bucket);
    add_host_stages(codegen::gpu_symbol_prefix(prim, bucket), codegen::gpu_schedule_host_code(ir, threads));
    return true;
  }
  std::shared_ptr<KernelProvider> jit_ = codegen::make_jit_provider();
};

}  // namespace

void add_host_stages(const std::string& prefix, codegen::HostCode host) {
  HostStages& s = host_stages();
  const std::lock_guard lock(s.mutex);
  s.by_prefix[prefix] = std::make_shared<const codegen::HostCode>(std::move(host));
}

int run_launch_on_host(const char* entry, void** params, const unsigned*, const unsigned*) {
  const std::string name(entry);
  // No exception may leave: this runs inside the fake driver's C function.
  constexpr int kNotFound = 500;  // CUDA_ERROR_NOT_FOUND
  const std::size_t at = name.rfind("_stage");
  std::shared_ptr<const codegen::HostCode> host;
  {
    HostStages& s = host_stages();
    const std::lock_guard lock(s.mutex);
    const auto it = at == std::string::npos ? s.by_prefix.end() : s.by_prefix.find(std::string_view(name).substr(0, at));
    if (it == s.by_prefix.end()) {
      FAIL_CHECK("a launch of " << name << ", which has no host stages");
      return kNotFound;
    }
    host = it->second;
  }
  const auto k = static_cast<std::size_t>(std::stoul(name.substr(at + 6)));
  const auto value = [&](int i) { return *static_cast<const std::uint64_t*>(params[i]); };
  using StageFn = std::int32_t (*)(void* const*, const std::int64_t* const*, std::int64_t*, std::int64_t, std::int64_t);
  const auto stage = reinterpret_cast<StageFn>(host->code.stages.at(k));
  const std::int32_t code = stage(reinterpret_cast<void* const*>(value(0)),
                                  reinterpret_cast<const std::int64_t* const*>(value(1)),
                                  reinterpret_cast<std::int64_t*>(value(2)), static_cast<std::int64_t>(value(4)),
                                  static_cast<std::int64_t>(value(5)));
  auto* status = reinterpret_cast<std::int32_t*>(value(3));
  if (code != 0 && *status == 0) *status = code;
  return 0;
}

GpuOnHost::GpuOnHost(const FakeDriver& fake, unsigned threads) : fake_(fake) {
  static const bool registered = [] {
    KernelCache::global().add_provider(std::make_shared<HostStagesProvider>(), 100);
    return true;
  }();
  (void)registered;
  KernelCache::global().clear();
  g_threads.store(threads);
  fake_.set_launch_hook(&run_launch_on_host);
}

GpuOnHost::~GpuOnHost() {
  fake_.set_launch_hook(nullptr);
  g_threads.store(0);
  KernelCache::global().clear();
  HostStages& s = host_stages();
  const std::lock_guard lock(s.mutex);
  s.by_prefix.clear();
}

}  // namespace nimble::testing
