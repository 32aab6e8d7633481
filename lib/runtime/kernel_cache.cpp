// The process-wide kernel cache (include/nimble/runtime/kernel.hpp). A
// concurrent map from primitive hash to kernel; a miss builds the kernel
// while holding that entry's lock, so concurrent VMs that miss on the same
// primitive build it once, and misses on different primitives run in parallel.
// A kernel with dynamic dims is cached as a tiered kernel, which keeps its
// specialized kernels per bucket (runtime/tiered_kernel.hpp): the cache's
// key is (primitive hash, bucket), the hash covering the primitive's source
// and so its dtypes; the disk cache's key adds the target and nimble's
// version (codegen/kernel_store.hpp).
#include <tbb/concurrent_hash_map.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "nimble/runtime/kernel.hpp"
#include "runtime/background_compiler.hpp"
#include "runtime/stats_counters.hpp"
#include "runtime/tiered_kernel.hpp"
#include "support/check.hpp"

namespace nimble {

void Kernel::run_values(std::span<const Value>, TensorRefs) const {
  throw_error(ErrorKind::not_supported, "not supported: this kernel takes tensors only");
}

void Kernel::run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const {
  std::vector<const Tensor*> refs;
  refs.reserve(inputs.size() + outputs.size());
  for (const Tensor& t : inputs) refs.push_back(&t);
  for (const Tensor& t : outputs) refs.push_back(&t);
  const TensorRefs all(refs);
  run(all.first(inputs.size()), all.subspan(inputs.size()));
}

Ref<Kernel> KernelProvider::specialize(const PrimitiveInfo&, const Bucket&) { return {}; }

std::string KernelCacheOptions::default_disk_cache_dir() {
  if (const char* dir = std::getenv("NIMBLE_CACHE_DIR")) {
    const std::string_view d(dir);
    return d == "off" ? std::string() : std::string(d);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/')
    return std::string(xdg) + "/nimble";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/')
    return std::string(home) + "/.cache/nimble";
  return {};
}

std::uint64_t content_hash(PrimitiveKind kind, std::string_view source, Device device) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char byte) {
    h ^= byte;
    h *= 0x100000001b3ull;
  };
  mix(static_cast<unsigned char>(kind));
  for (char c : source) mix(static_cast<unsigned char>(c));
  if (!device.is_cpu()) {
    mix(0);  // not a character of the source
    mix(static_cast<unsigned char>(device.kind));
    for (int shift = 0; shift < 32; shift += 8) mix(static_cast<unsigned char>(static_cast<std::uint32_t>(device.index) >> shift));
  }
  return h;
}

struct KernelCache::Impl {
  struct Provider {
    std::shared_ptr<KernelProvider> provider;
    int priority;
  };
  mutable std::mutex providers_mutex;
  std::vector<Provider> providers;  // sorted by decreasing priority, stable
  KernelCacheOptions options;       // guarded by providers_mutex
  tbb::concurrent_hash_map<std::uint64_t, Ref<Kernel>> kernels;
  // concurrent_hash_map's clear() must not run beside any other operation
  // on the map (found by test/soak: a SIGSEGV in clear() while other threads
  // looked kernels up): every use takes this shared, clear() exclusively.
  mutable std::shared_mutex clearing;
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};

  std::vector<Provider> snapshot() const {
    std::lock_guard lock(providers_mutex);
    return providers;
  }
  KernelCacheOptions current_options() const {
    std::lock_guard lock(providers_mutex);
    return options;
  }
};

KernelCache::KernelCache() : impl_(std::make_unique<Impl>()) {}
KernelCache::~KernelCache() { BackgroundCompiler::process().wait(); }

KernelCache& KernelCache::global() {
  // Destroyed at exit, which only drops the cache's references: a VM that
  // outlives it keeps the kernels it uses alive through its own references.
  // (A leaked cache would hide its kernels from LeakSanitizer: the map's
  // nodes live in oneTBB's allocator, whose memory it does not scan.)
  static KernelCache cache;
  return cache;
}

void KernelCache::add_provider(std::shared_ptr<KernelProvider> provider, int priority) {
  NIMBLE_ASSERT(provider != nullptr, "add_provider: null provider");
  std::lock_guard lock(impl_->providers_mutex);
  auto& list = impl_->providers;
  std::erase_if(list, [&](const Impl::Provider& p) { return p.provider->name() == provider->name(); });
  auto at = std::find_if(list.begin(), list.end(),
                         [&](const Impl::Provider& p) { return p.priority < priority; });
  list.insert(at, {std::move(provider), priority});
}

Ref<Kernel> KernelCache::get(const PrimitiveInfo& prim) { return get(prim, {}); }

Ref<Kernel> KernelCache::get(const PrimitiveInfo& prim, std::string_view provider) {
  // A kernel from one named provider is cached under the primitive's hash
  // mixed with the provider's name, apart from the first-serving one.
  const std::uint64_t key =
      provider.empty() ? prim.hash : prim.hash ^ (content_hash(PrimitiveKind::compute, provider) * 31);
  const std::shared_lock not_clearing(impl_->clearing);
  {
    decltype(impl_->kernels)::const_accessor found;
    if (impl_->kernels.find(found, key)) {
      impl_->hits.fetch_add(1, std::memory_order_relaxed);
      stats::count_memory_lookup(true);
      return found->second;
    }
  }
  decltype(impl_->kernels)::accessor entry;
  if (!impl_->kernels.insert(entry, key)) {  // another thread built it meanwhile
    impl_->hits.fetch_add(1, std::memory_order_relaxed);
    stats::count_memory_lookup(true);
    return entry->second;
  }
  impl_->misses.fetch_add(1, std::memory_order_relaxed);
  stats::count_memory_lookup(false);
  bool provider_found = provider.empty();
  try {
    for (const Impl::Provider& p : impl_->snapshot()) {
      if (!provider.empty()) {
        if (p.provider->name() != provider) continue;
        provider_found = true;
      }
      if (Ref<Kernel> kernel = p.provider->get(prim)) {
        entry->second = make_tiered_kernel(prim, std::move(kernel), p.provider, impl_->current_options());
        return entry->second;
      }
    }
  } catch (...) {
    impl_->kernels.erase(entry);
    throw;
  }
  impl_->kernels.erase(entry);
  if (!provider_found)
    throw_error(ErrorKind::not_supported,
                "not supported: no kernel provider called \"{}\" (for primitive {})", provider,
                prim.name);
  if (!provider.empty())
    throw_error(ErrorKind::not_supported,
                "not supported: kernel provider \"{}\" does not serve primitive {} (hash {:016x})",
                provider, prim.name, prim.hash);
  throw_error(ErrorKind::not_supported,
              "not supported: no kernel provider serves primitive {} (hash {:016x}); link "
              "nimble::nimble (its reference provider and JIT) or load an exported module",
              prim.name, prim.hash);
}

void KernelCache::clear() {
  BackgroundCompiler::process().wait();
  const std::unique_lock clearing(impl_->clearing);
  impl_->kernels.clear();
}

void KernelCache::configure(KernelCacheOptions options) {
  options.buckets.validate();
  // Compilations queued under the old options finish under them (their
  // provider reads the disk cache directory from here).
  BackgroundCompiler::process().wait();
  {
    std::lock_guard lock(impl_->providers_mutex);
    impl_->options = std::move(options);
  }
  clear();
}

KernelCacheOptions KernelCache::options() const { return impl_->current_options(); }

void KernelCache::wait_for_background() { BackgroundCompiler::process().wait(); }

std::vector<Bucket> KernelCache::specialized_buckets(const PrimitiveInfo& prim) const {
  const std::shared_lock not_clearing(impl_->clearing);
  decltype(impl_->kernels)::const_accessor found;
  if (!impl_->kernels.find(found, prim.hash)) return {};
  return found->second->specialized_buckets();
}

KernelCache::Stats KernelCache::stats() const {
  const std::shared_lock not_clearing(impl_->clearing);
  return {impl_->hits.load(), impl_->misses.load(), impl_->kernels.size(), BackgroundCompiler::process().pending()};
}

}  // namespace nimble
