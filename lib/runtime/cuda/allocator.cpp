#include "runtime/cuda/allocator.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "support/check.hpp"

namespace nimble::cuda {

namespace {

void* to_pointer(CUdeviceptr p) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }
CUdeviceptr to_device(void* p) noexcept { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace

// One lock for the whole pool: device allocations are rare next to the
// kernels they feed (the memory plan reuses storages within a call).
struct DeviceAllocator::Pool {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<CUdeviceptr>> free;  // by size class
  AllocatorStats stats;
};

DeviceAllocator::DeviceAllocator(std::shared_ptr<const Context> context)
    : context_(std::move(context)), pool_(std::make_unique<Pool>()) {}

DeviceAllocator::~DeviceAllocator() { trim(); }

Device DeviceAllocator::device() const noexcept { return Device::cuda(context_->ordinal()); }

void* DeviceAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t bytes = PooledCpuAllocator::size_class_bytes(nbytes);
  std::unique_lock lock(pool_->mutex);
  AllocatorStats& s = pool_->stats;
  CUdeviceptr block = 0;
  if (auto it = pool_->free.find(bytes); it != pool_->free.end() && !it->second.empty()) {
    block = it->second.back();
    it->second.pop_back();
    s.cached_bytes -= bytes;
    ++s.pool_hits;
  } else {
    const Driver& d = context_->driver();
    context_->make_current();
    CUresult r = d.api().cuMemAlloc_v2(&block, bytes);
    if (r == kErrorOutOfMemory && s.cached_bytes > 0) {
      lock.unlock();
      trim();
      lock.lock();
      r = d.api().cuMemAlloc_v2(&block, bytes);
    }
    if (r == kErrorOutOfMemory)
      throw_error(ErrorKind::resource_exhausted,
                  "CUDA: out of device memory on cuda:{} ({}): cannot allocate {} bytes ({} live in nimble's tensors)",
                  context_->ordinal(), context_->name(), bytes, s.live_bytes);
    d.check(r, "cuMemAlloc_v2");
    ++s.system_allocations;
  }
  ++s.allocations;
  s.live_bytes += nbytes;
  if (s.live_bytes > s.peak_live_bytes) s.peak_live_bytes = s.live_bytes;
  return to_pointer(block);
}

void DeviceAllocator::deallocate(void* ptr, std::size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  const std::size_t bytes = PooledCpuAllocator::size_class_bytes(nbytes);
  const std::lock_guard lock(pool_->mutex);
  pool_->stats.live_bytes -= nbytes;
  pool_->stats.cached_bytes += bytes;
  pool_->free[bytes].push_back(to_device(ptr));
}

void DeviceAllocator::trim() noexcept {
  const std::lock_guard lock(pool_->mutex);
  bool current = false;
  for (auto& [bytes, blocks] : pool_->free) {
    for (CUdeviceptr block : blocks) {
      if (!current) {
        // No error can leave here; a context that cannot be made current
        // cannot free either, and the blocks stay with the driver.
        try {
          context_->make_current();
          current = true;
        } catch (const Error&) {
          return;
        }
      }
      (void)context_->driver().api().cuMemFree_v2(block);
      pool_->stats.cached_bytes -= bytes;
      ++pool_->stats.system_frees;
    }
    blocks.clear();
  }
}

AllocatorStats DeviceAllocator::stats() const noexcept {
  const std::lock_guard lock(pool_->mutex);
  return pool_->stats;
}

Stream& DeviceAllocator::copy_stream() {
  if (!copy_stream_) copy_stream_ = std::make_unique<Stream>(context_);
  return *copy_stream_;
}

template <class Copy>
void DeviceAllocator::on_a_stream(Copy&& copy) {
  if (Stream* scoped = scoped_stream(*context_)) {  // the calling VM's
    copy(*scoped);
    return;
  }
  const std::lock_guard lock(copy_mutex_);
  copy(copy_stream());
}

void DeviceAllocator::copy_from_host(void* dst, const void* src, std::size_t n) {
  if (n == 0) return;
  on_a_stream([&](Stream& stream) {
    stream.copy_to_device(dst, src, n);
    stream.synchronize();
  });
}

void DeviceAllocator::copy_to_host(void* dst, const void* src, std::size_t n) {
  if (n == 0) return;
  on_a_stream([&](Stream& stream) { stream.copy_to_host(dst, src, n); });
}

void DeviceAllocator::copy_within(void* dst, const void* src, std::size_t n) {
  if (n == 0) return;
  on_a_stream([&](Stream& stream) {
    stream.copy_on_device(dst, src, n);
    stream.synchronize();
  });
}

DeviceAllocator& process_device_allocator(int ordinal) {
  // Never destroyed, as cpu_allocator(): tensors may outlive main's locals,
  // and the process's driver stays loaded anyway.
  static std::mutex mutex;
  static auto* const allocators = new std::map<int, DeviceAllocator*>;
  const std::lock_guard lock(mutex);
  if (const auto it = allocators->find(ordinal); it != allocators->end()) return *it->second;
  auto* allocator = new DeviceAllocator(Context::open(process_driver(), ordinal));
  allocators->emplace(ordinal, allocator);
  return *allocator;
}

}  // namespace nimble::cuda
