// Kernels and where they come from. The VM calls every primitive function
// (an op, or later a fused group of ops) through one calling convention, a
// Kernel. Kernels are not part of an Executable: the runtime's KernelCache
// asks its KernelProviders for one on first use — the compiler library
// registers its reference provider (and later the JIT), an ahead-of-time
// exported module brings its own — and keeps it for every VM in the process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nimble/runtime/bucket.hpp"
#include "nimble/runtime/tensor.hpp"
#include "nimble/runtime/value.hpp"
#include "nimble/support/ref_counted.hpp"

namespace nimble {

/// A dynamic dim of a kernel's arguments: dim `dim` of argument `argument`
/// (the inputs, then the outputs).
struct DynamicDim {
  std::uint32_t argument = 0;
  std::uint32_t dim = 0;
};

/// A primitive function compiled for one device. Destination-passing: the VM
/// allocates every output before the call (from the shape function where the
/// shape is dynamic) and the kernel writes into it.
class Kernel : public RefCounted {
 public:
  virtual ~Kernel() = default;
  /// Tensors passed by address: the caller keeps them alive for the call.
  /// (The VM passes its registers' tensors so, with no reference counting.)
  using TensorRefs = std::span<const Tensor* const>;

  /// Computes `outputs` from tensor `inputs`. Throws nimble::Error for bad
  /// data (an index out of range, an integer division by zero); never writes
  /// outside `outputs`. Thread-safe.
  virtual void run(TensorRefs inputs, TensorRefs outputs) const = 0;
  /// The same for a primitive with a tuple or ADT input (concatenate's tuple,
  /// stack's list). By default: Error(not_supported).
  virtual void run_values(std::span<const Value> inputs, TensorRefs outputs) const;
  /// run() for tensors held in arrays.
  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const;
  /// The dims a kernel specialized for a Bucket would depend on, in the
  /// bucket's order (a generic kernel's shape symbols, each at the input dim
  /// that gives its value). Empty (the default): nothing to specialize.
  [[nodiscard]] virtual std::span<const DynamicDim> dynamic_dims() const noexcept { return {}; }
  /// The buckets this kernel has specialized kernels for so far (a kernel
  /// the KernelCache tiers); empty by default.
  [[nodiscard]] virtual std::vector<Bucket> specialized_buckets() const { return {}; }
};

/// What a primitive computes: its result, or the shapes of its result.
enum class PrimitiveKind : std::uint8_t {
  compute,         ///< outputs are the primitive's results
  shape_function,  ///< outputs are one i64[rank] tensor per result: its shape
};

/// A primitive function as the runtime knows it: its IR text (the compiler's
/// textual form, `def @name(%p0: f32[?, 768]) -> f32[?, 768] { ... }`) and
/// a content hash of that text, which keys every kernel cache.
struct PrimitiveInfo {
  std::string name;  ///< e.g. "dense_7", for messages and profiles
  PrimitiveKind kind = PrimitiveKind::compute;
  std::uint32_t num_inputs = 0;
  std::uint32_t num_outputs = 0;
  std::string source;
  std::uint64_t hash = 0;  ///< content_hash(kind, source, device)
  /// Where the kernel runs: its tensors are there (compile's target for the
  /// kernels place_devices put on it; shape functions run on the CPU).
  Device device = Device::cpu();
};

/// FNV-1a 64 of the kind and the source text, and of the device when it is
/// not the CPU (a CPU primitive's hash is the same as before devices were).
[[nodiscard]] std::uint64_t content_hash(PrimitiveKind kind, std::string_view source,
                                         Device device = Device::cpu()) noexcept;

/// A source of kernels: the reference implementations, the JIT, an exported
/// module. A provider runs inside KernelCache::get (which holds the cache
/// shared while it does): it must not call back into the KernelCache.
class KernelProvider {
 public:
  virtual ~KernelProvider() = default;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  /// A kernel for `prim`, or null if this provider does not serve it. Throws
  /// nimble::Error if it should but cannot (a failed compilation).
  [[nodiscard]] virtual Ref<Kernel> get(const PrimitiveInfo& prim) = 0;
  /// A kernel for `prim` specialized for `bucket` (facts about the
  /// dynamic_dims() of the kernel get(prim) gave), or null if this provider
  /// does not specialize (the default). May be called on a background
  /// thread, concurrently with anything else. Throws nimble::Error if it
  /// should but cannot.
  [[nodiscard]] virtual Ref<Kernel> specialize(const PrimitiveInfo& prim, const Bucket& bucket);
};

/// How the process's KernelCache specializes and keeps kernels.
struct KernelCacheOptions {
  BucketPolicy buckets;
  /// Tiered (true, the default): a call in a new bucket runs the generic
  /// kernel at once while the specialized one compiles in the background (a
  /// oneTBB task arena), used from the first call after it is ready.
  /// Synchronous (false): the call compiles it first (tests, benches).
  bool background = true;
  /// The directory where compiled kernels persist between processes (made
  /// on first use, private to the user), keyed by content hash; empty: none.
  /// Nothing in it runs unless this user wrote it: the directory and each
  /// file must be the user's and writable by no one else (else the cache is
  /// off, or the file ignored, with one warning on stderr), and each entry
  /// carries a MAC (HMAC-SHA256) under a per-user secret kept in the
  /// directory (mode 0600), checked before any byte of it is loaded.
  std::string disk_cache_dir = default_disk_cache_dir();
  /// The most bytes of entries the disk cache keeps: past it, a store
  /// removes the least recently used entries (a hit counts as a use).
  std::uint64_t disk_cache_max_bytes = std::uint64_t{1} << 30;

  /// $NIMBLE_CACHE_DIR if set ("" or "off": no disk cache), else
  /// $XDG_CACHE_HOME/nimble, else $HOME/.cache/nimble, else none.
  [[nodiscard]] static std::string default_disk_cache_dir();
};

/// The process-wide cache of kernels, keyed by primitive hash. Thread-safe;
/// a kernel is built once even when many VMs miss at the same time.
class KernelCache {
 public:
  /// The process's cache (destroyed at exit; VMs keep the kernels they use).
  [[nodiscard]] static KernelCache& global();

  /// Adds `provider`; providers are asked in decreasing `priority` (ties: in
  /// the order added). Adding a provider with the same name again replaces it.
  void add_provider(std::shared_ptr<KernelProvider> provider, int priority = 0);
  /// The kernel for `prim`: cached, or from the first provider that serves
  /// it. Throws Error(not_supported) naming the primitive if none does.
  [[nodiscard]] Ref<Kernel> get(const PrimitiveInfo& prim);
  /// The kernel for `prim` from the provider called `provider` only ("jit",
  /// "reference"), cached apart from get(prim)'s; empty means get(prim).
  /// Throws Error(not_supported) if that provider is missing or declines.
  [[nodiscard]] Ref<Kernel> get(const PrimitiveInfo& prim, std::string_view provider);
  /// Forgets every cached kernel (providers stay; VMs keep the kernels they
  /// use). Waits for background compilations and for get() calls in
  /// progress on other threads first.
  void clear();

  /// Replaces the options (after validating them: Error(invalid_argument))
  /// and forgets every cached kernel, which were bucketed by the old policy.
  void configure(KernelCacheOptions options);
  [[nodiscard]] KernelCacheOptions options() const;
  /// Blocks until no specialized kernel is compiling in the background.
  void wait_for_background();
  /// The buckets the cached kernel of `prim` has specialized kernels for
  /// (what an export includes by default); empty if it is not cached.
  [[nodiscard]] std::vector<Bucket> specialized_buckets(const PrimitiveInfo& prim) const;

  struct Stats {
    std::uint64_t hits = 0;     ///< get() found the primitive's kernel
    std::uint64_t misses = 0;   ///< get() asked a provider
    std::uint64_t entries = 0;  ///< primitives cached
    std::uint64_t pending = 0;  ///< specialized kernels compiling in the background now
  };
  [[nodiscard]] Stats stats() const;

  KernelCache();
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nimble
