#include "nimble/runtime/allocator.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/spin_mutex.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "runtime/cuda/allocator.hpp"

#include "support/check.hpp"
#include "nimble/support/fault_injection.hpp"
#include "runtime/trace.hpp"

namespace nimble {
namespace {

// Size classes: multiples of 64 up to 256 bytes, then four per power of two:
// a request in (2^k, 2^(k+1)] is served by 2^k + s * 2^(k-2), s = 1..4.
constexpr std::size_t kSmallClasses = 4;  // 64, 128, 192, 256
constexpr int kMaxLog2 = 62;              // nothing larger than 2^62 bytes is served
constexpr std::size_t kNumClasses = kSmallClasses + (kMaxLog2 - 8 + 1) * 4;
constexpr std::size_t kMaxRequest = std::size_t{1} << kMaxLog2;

struct SizeClass {
  std::size_t index;
  std::size_t bytes;
};

SizeClass size_class(std::size_t nbytes) noexcept {
  if (nbytes <= 256) {
    const std::size_t units = (nbytes + 63) / 64;  // 1..4 (nbytes > 0)
    return {units - 1, units * 64};
  }
  const int k = std::bit_width(nbytes - 1) - 1;  // 2^k < nbytes <= 2^(k+1), k >= 8
  const std::size_t base = std::size_t{1} << k;
  const std::size_t step = base >> 2;
  const std::size_t sub = (nbytes - base + step - 1) / step;  // 1..4
  return {kSmallClasses + static_cast<std::size_t>(k - 8) * 4 + (sub - 1), base + sub * step};
}

std::size_t class_bytes(std::size_t index) noexcept {
  if (index < kSmallClasses) return (index + 1) * 64;
  const std::size_t k = 8 + (index - kSmallClasses) / 4;
  const std::size_t sub = (index - kSmallClasses) % 4 + 1;
  return (std::size_t{1} << k) + sub * (std::size_t{1} << (k - 2));
}

// A freed block stores the link to the next free block of its class in its
// first bytes, so pooling never allocates.
struct FreeBlock {
  FreeBlock* next;
};

// Blocks of at least this many bytes start on a page. A kernel that reads
// one buffer and writes another whose start lies a few cache lines past the
// first's in the page (4 KiB aliasing: a load waits on an unrelated store
// to the same page offset) ran 20% slower here (add over f32[16384] with
// the output 64 bytes past an input's page offset: 2235 against 1864 ns);
// whole pages keep every large buffer at offset 0. Smaller blocks keep 64:
// a page would be much of their size.
constexpr std::size_t kPageBytes = 4096;
constexpr std::size_t kPageAlignedFrom = 16384;

std::align_val_t block_alignment(std::size_t class_bytes) noexcept {
  return std::align_val_t{class_bytes >= kPageAlignedFrom ? kPageBytes : PooledCpuAllocator::kAlignment};
}

void update_max(std::atomic<std::size_t>& max, std::size_t value) noexcept {
  std::size_t seen = max.load(std::memory_order_relaxed);
  while (value > seen && !max.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

struct PooledCpuAllocator::Pool {
  struct alignas(64) FreeList {  // one cache line per lock: no false sharing
    oneapi::tbb::spin_mutex mutex;
    FreeBlock* head = nullptr;
    // Allocations this list served, written under `mutex` (a plain store, no
    // atomic read-modify-write on the hot path), read by stats() at any time.
    std::atomic<std::uint64_t> hits{0};
  };
  std::array<FreeList, kNumClasses> lists;

  std::atomic<std::size_t> live_bytes{0};
  std::atomic<std::size_t> peak_live_bytes{0};
  std::atomic<std::size_t> cached_bytes{0};
  std::atomic<std::size_t> max_cached_bytes{std::size_t{1} << 30};
  // allocations = the lists' hits + system_allocations.
  std::atomic<std::uint64_t> system_allocations{0};
  std::atomic<std::uint64_t> system_frees{0};

  void system_free(void* ptr, std::size_t class_bytes) noexcept {
    ::operator delete(ptr, block_alignment(class_bytes));
    system_frees.fetch_add(1, std::memory_order_relaxed);
  }
};

PooledCpuAllocator::PooledCpuAllocator() : pool_(new Pool) {}

PooledCpuAllocator::~PooledCpuAllocator() {
  trim();
  delete pool_;
}

std::size_t PooledCpuAllocator::size_class_bytes(std::size_t nbytes) noexcept {
  return nbytes == 0 ? 0 : size_class(nbytes).bytes;
}

void* PooledCpuAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  detail::allocation_point();
  if (nbytes > kMaxRequest)
    throw_error(ErrorKind::resource_exhausted,
                "cpu allocator: cannot allocate {} bytes (at most 2^{} bytes per block)", nbytes,
                kMaxLog2);
  const SizeClass cls = size_class(nbytes);
  Pool::FreeList& list = pool_->lists[cls.index];
  void* block = nullptr;
  {
    oneapi::tbb::spin_mutex::scoped_lock lock(list.mutex);
    if (FreeBlock* head = list.head) {
      list.head = head->next;
      block = head;
      list.hits.store(list.hits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  if (block) {
    pool_->cached_bytes.fetch_sub(cls.bytes, std::memory_order_relaxed);
  } else {
    const bool traced = trace::recording();  // once: a trace may start meanwhile
    const auto start = traced ? trace::Clock::now() : trace::Clock::time_point{};
    block = ::operator new(cls.bytes, block_alignment(cls.bytes), std::nothrow);
    if (!block)
      throw_error(ErrorKind::resource_exhausted, "cpu allocator: out of memory allocating {} bytes",
                  cls.bytes);
    pool_->system_allocations.fetch_add(1, std::memory_order_relaxed);
    if (traced) {
      char bytes[40];
      const auto n = fmt::format_to_n(bytes, sizeof bytes, R"("bytes": {})", cls.bytes).size;
      trace::complete("allocate", "memory", start, trace::Clock::now(), std::string_view(bytes, n));
    }
  }
  const std::size_t live =
      pool_->live_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  update_max(pool_->peak_live_bytes, live);
  return block;
}

void PooledCpuAllocator::deallocate(void* ptr, std::size_t nbytes) noexcept {
  if (!ptr) return;
  NIMBLE_ASSERT(nbytes > 0 && nbytes <= kMaxRequest, "deallocate: size does not match a block");
  const SizeClass cls = size_class(nbytes);
  pool_->live_bytes.fetch_sub(nbytes, std::memory_order_relaxed);
  const std::size_t cached =
      pool_->cached_bytes.fetch_add(cls.bytes, std::memory_order_relaxed) + cls.bytes;
  if (cached > pool_->max_cached_bytes.load(std::memory_order_relaxed)) {
    pool_->cached_bytes.fetch_sub(cls.bytes, std::memory_order_relaxed);
    pool_->system_free(ptr, cls.bytes);
    return;
  }
  Pool::FreeList& list = pool_->lists[cls.index];
  auto* block = static_cast<FreeBlock*>(ptr);
  oneapi::tbb::spin_mutex::scoped_lock lock(list.mutex);
  block->next = list.head;
  list.head = block;
}

void PooledCpuAllocator::trim() noexcept {
  for (std::size_t i = 0; i < kNumClasses; ++i) {
    Pool::FreeList& list = pool_->lists[i];
    FreeBlock* head;
    {
      oneapi::tbb::spin_mutex::scoped_lock lock(list.mutex);
      head = std::exchange(list.head, nullptr);
    }
    while (head) {
      FreeBlock* next = head->next;
      pool_->system_free(head, class_bytes(i));
      pool_->cached_bytes.fetch_sub(class_bytes(i), std::memory_order_relaxed);
      head = next;
    }
  }
}

void PooledCpuAllocator::set_max_cached_bytes(std::size_t bytes) noexcept {
  pool_->max_cached_bytes.store(bytes, std::memory_order_relaxed);
}

void PooledCpuAllocator::reset_peak() noexcept {
  pool_->peak_live_bytes.store(pool_->live_bytes.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
}

AllocatorStats PooledCpuAllocator::stats() const noexcept {
  AllocatorStats s;
  s.live_bytes = pool_->live_bytes.load(std::memory_order_relaxed);
  s.peak_live_bytes = pool_->peak_live_bytes.load(std::memory_order_relaxed);
  s.cached_bytes = pool_->cached_bytes.load(std::memory_order_relaxed);
  for (const Pool::FreeList& list : pool_->lists) s.pool_hits += list.hits.load(std::memory_order_relaxed);
  s.system_allocations = pool_->system_allocations.load(std::memory_order_relaxed);
  s.allocations = s.pool_hits + s.system_allocations;
  s.system_frees = pool_->system_frees.load(std::memory_order_relaxed);
  return s;
}

PooledCpuAllocator& cpu_allocator() noexcept {
  // Leaked on purpose: tensors held in static objects may be destroyed after
  // any allocator with static storage duration would be.
  static auto* const allocator = new PooledCpuAllocator;
  return *allocator;
}

namespace {

struct AllocatorRegistry {
  std::mutex mutex;
  std::vector<Allocator*> allocators;  // of devices other than the CPU
};

AllocatorRegistry& registry() {
  static auto* const r = new AllocatorRegistry;  // leaked, as cpu_allocator()
  return *r;
}

}  // namespace

void register_allocator(Allocator& allocator) {
  if (allocator.device().is_cpu())
    throw_error(ErrorKind::invalid_argument, "register_allocator: expected a device other than the CPU, got cpu");
  unregister_allocator(allocator.device());
  AllocatorRegistry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.allocators.push_back(&allocator);
}

void unregister_allocator(Device device) {
  AllocatorRegistry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::erase_if(r.allocators, [&](const Allocator* a) { return a->device() == device; });
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  {
    AllocatorRegistry& r = registry();
    const std::lock_guard lock(r.mutex);
    for (Allocator* a : r.allocators)
      if (a->device() == device) return *a;
  }
  // A GPU nobody registered: the process's own allocator for it, through
  // the CUDA driver (Error(not_supported) when there is no driver or device).
  try {
    return cuda::process_device_allocator(device.index);
  } catch (Error& e) {
    throw e.with_context(fmt::format("memory on {}", to_string(device)));
  }
}

namespace {

// The default copies are memcpy: only for memory the host reads.
void check_host_copy(const Allocator& a) {
  if (!a.host_accessible())
    throw_error(ErrorKind::not_supported, "not supported: copying to or from {}: its allocator has no copies",
                to_string(a.device()));
}

}  // namespace

void Allocator::copy_from_host(void* dst, const void* src, std::size_t n) {
  check_host_copy(*this);
  if (n != 0) std::memcpy(dst, src, n);
}

void Allocator::copy_to_host(void* dst, const void* src, std::size_t n) {
  check_host_copy(*this);
  if (n != 0) std::memcpy(dst, src, n);
}

void Allocator::copy_within(void* dst, const void* src, std::size_t n) {
  check_host_copy(*this);
  if (n != 0) std::memmove(dst, src, n);
}

}  // namespace nimble
