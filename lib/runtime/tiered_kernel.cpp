#include "runtime/tiered_kernel.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <mutex>

#include "runtime/background_compiler.hpp"
#include "runtime/bucket_code.hpp"
#include "runtime/stats_counters.hpp"
#include "support/log.hpp"

namespace nimble {
namespace {

using BucketKey = std::array<std::uint64_t, kMaxBucketDims>;

class TieredKernel final : public Kernel {
 public:
  TieredKernel(const PrimitiveInfo& prim, Ref<Kernel> generic, std::shared_ptr<KernelProvider> provider,
               const KernelCacheOptions& options)
      : prim_(prim),
        generic_(std::move(generic)),
        provider_(std::move(provider)),
        policy_(options.buckets),
        background_(options.background ? &BackgroundCompiler::process() : nullptr),
        limit_(options.buckets.max_specialized_per_function) {
    const std::span<const DynamicDim> dims = generic_->dynamic_dims();
    dims_.assign(dims.begin(), dims.end());
  }

  using Kernel::run;

  void run(TensorRefs inputs, TensorRefs outputs) const override {
    BucketKey key{};
    for (std::size_t i = 0; i < dims_.size(); ++i) {
      const DynamicDim d = dims_[i];
      const Tensor* t = d.argument < inputs.size() ? inputs[d.argument] : nullptr;
      // A missing argument or dim is the generic kernel's to report.
      if (t == nullptr || d.dim >= t->rank()) [[unlikely]]
        return generic_->run(inputs, outputs);
      key[i] = bucket::code_of(policy_, t->shape()[d.dim]);
    }
    select(key).run(inputs, outputs);
  }

  // Tuple inputs (concatenate's) run the generic kernel.
  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    generic_->run_values(inputs, outputs);
  }

  std::span<const DynamicDim> dynamic_dims() const noexcept override { return dims_; }

  std::vector<Bucket> specialized_buckets() const override {
    std::vector<Bucket> buckets;
    const std::uint32_t n = count_.load(std::memory_order_acquire);
    for (std::uint32_t s = 0; s < n; ++s) {
      const Kernel* k = slots_[s].kernel.load(std::memory_order_acquire);
      if (k == nullptr || k == generic_.get()) continue;  // compiling, or failed
      buckets.push_back(bucket_of(slots_[s].key));
    }
    return buckets;
  }

 private:
  struct Slot {
    BucketKey key{};
    std::atomic<const Kernel*> kernel{nullptr};  // null while compiling
    Ref<Kernel> owner;                           // written once, before `kernel`
  };

  const Kernel& select(const BucketKey& key) const {
    const std::uint32_t n = count_.load(std::memory_order_acquire);
    for (std::uint32_t s = 0; s < n; ++s) {
      if (slots_[s].key != key) continue;
      const Kernel* k = slots_[s].kernel.load(std::memory_order_acquire);
      return k != nullptr ? *k : *generic_;
    }
    return new_bucket(key);
  }

  const Kernel& new_bucket(const BucketKey& key) const {
    if (full_.load(std::memory_order_relaxed)) {
      stats::count_bucket_over_limit();
      return *generic_;
    }
    Slot* slot = nullptr;
    bool first_past_limit = false;
    {
      std::lock_guard lock(mutex_);
      const std::uint32_t n = count_.load(std::memory_order_relaxed);
      for (std::uint32_t s = 0; s < n; ++s)
        if (slots_[s].key == key) return *generic_;  // another thread added it: compiling
      if (n >= limit_) {
        stats::count_bucket_over_limit();
        first_past_limit = !full_.exchange(true, std::memory_order_relaxed);
      } else {
        slot = &slots_[n];
        slot->key = key;
        count_.store(n + 1, std::memory_order_release);
      }
    }
    if (slot == nullptr) {
      if (first_past_limit) warn_past_limit();
      return *generic_;
    }
    if (background_) {
      Ref<const TieredKernel> self(this);  // alive until the task is done
      try {
        background_->submit([self, slot] { self->specialize(*slot); });
      } catch (...) {  // not queued (out of memory): the generic kernel keeps the bucket
        stats::count_specialization_failed();
        slot->owner = generic_;
        slot->kernel.store(generic_.get(), std::memory_order_release);
      }
      return *generic_;
    }
    specialize(*slot);
    return *slot->kernel.load(std::memory_order_acquire);
  }

  // Compiles the slot's kernel. The generic kernel serves its bucket if the
  // provider has none for it (an artifact exported without that bucket) or
  // fails (counted; the error is the provider's to report when asked
  // directly). Never throws: it may run on a background thread.
  void specialize(Slot& slot) const noexcept {
    try {
      slot.owner = provider_->specialize(prim_, bucket_of(slot.key));
    } catch (...) {
      stats::count_specialization_failed();
      slot.owner = {};
    }
    if (!slot.owner) slot.owner = generic_;
    slot.kernel.store(slot.owner.get(), std::memory_order_release);
  }

  // Once per kernel, outside the lock (the host's sink may be slow): calls
  // past the limit are slower, and the user can act on it.
  void warn_past_limit() const noexcept {
    try {
      detail::log(LogLevel::warning,
                  fmt::format("kernel {}: called in more than {} shape buckets; calls in further buckets "
                              "run its generic kernel, which is slower. Raise "
                              "KernelCacheOptions::buckets.max_specialized_per_function, or coarsen the "
                              "buckets (BucketPolicy::exact_up_to, max_multiple)",
                              prim_.name, limit_));
    } catch (...) {  // out of memory for the message: the call goes on without it
    }
  }

  Bucket bucket_of(const BucketKey& key) const {
    Bucket bucket;
    for (std::size_t i = 0; i < dims_.size(); ++i) bucket.dims.push_back(bucket::decode(policy_, key[i]));
    return bucket;
  }

  PrimitiveInfo prim_;
  Ref<Kernel> generic_;
  std::shared_ptr<KernelProvider> provider_;
  BucketPolicy policy_;
  BackgroundCompiler* background_;  // null: synchronous
  std::uint32_t limit_;
  std::vector<DynamicDim> dims_;
  mutable std::mutex mutex_;  // adding a slot
  mutable std::atomic<std::uint32_t> count_{0};
  mutable std::atomic<bool> full_{false};
  mutable std::array<Slot, 64> slots_;
};

}  // namespace

Ref<Kernel> make_tiered_kernel(const PrimitiveInfo& prim, Ref<Kernel> generic,
                               std::shared_ptr<KernelProvider> provider, const KernelCacheOptions& options) {
  const std::size_t dims = generic->dynamic_dims().size();
  if (dims == 0 || dims > kMaxBucketDims || options.buckets.max_specialized_per_function == 0)
    return generic;
  return make_ref<TieredKernel>(prim, std::move(generic), std::move(provider), options);
}

}  // namespace nimble
