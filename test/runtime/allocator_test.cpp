#include "nimble/runtime/allocator.hpp"

#include <catch2/catch.hpp>
#include <oneapi/tbb/parallel_for.h>

#include <cstring>
#include <vector>

#include "nimble/runtime/tensor.hpp"

using namespace nimble;

TEST_CASE("size classes bound the slack to 25%", "[runtime]") {
  CHECK(PooledCpuAllocator::size_class_bytes(0) == 0);
  CHECK(PooledCpuAllocator::size_class_bytes(1) == 64);
  CHECK(PooledCpuAllocator::size_class_bytes(64) == 64);
  CHECK(PooledCpuAllocator::size_class_bytes(65) == 128);
  CHECK(PooledCpuAllocator::size_class_bytes(256) == 256);
  CHECK(PooledCpuAllocator::size_class_bytes(257) == 320);
  CHECK(PooledCpuAllocator::size_class_bytes(1000) == 1024);
  CHECK(PooledCpuAllocator::size_class_bytes(1025) == 1280);
  CHECK(PooledCpuAllocator::size_class_bytes(3 << 20) == (3 << 20));
  for (std::size_t n = 1; n < (1u << 20); n = n * 3 / 2 + 1) {
    const std::size_t c = PooledCpuAllocator::size_class_bytes(n);
    REQUIRE(c >= n);
    REQUIRE(c % 64 == 0);
    REQUIRE((c <= 256 || c - n <= n / 4 + 1));
  }
}

TEST_CASE("the pool reuses freed blocks and counts system allocations", "[runtime]") {
  PooledCpuAllocator alloc;
  void* a = alloc.allocate(1000);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % Allocator::kAlignment == 0);
  std::memset(a, 0xab, 1000);
  AllocatorStats s = alloc.stats();
  CHECK(s.live_bytes == 1000);
  CHECK(s.system_allocations == 1);
  CHECK(s.pool_hits == 0);

  alloc.deallocate(a, 1000);
  s = alloc.stats();
  CHECK(s.live_bytes == 0);
  CHECK(s.cached_bytes == 1024);

  // Same size class (1000 and 900 both map to 1024): served from the pool.
  void* b = alloc.allocate(900);
  CHECK(b == a);
  s = alloc.stats();
  CHECK(s.system_allocations == 1);
  CHECK(s.pool_hits == 1);
  CHECK(s.cached_bytes == 0);
  CHECK(s.peak_live_bytes == 1000);

  void* c = alloc.allocate(5000);
  CHECK(alloc.stats().peak_live_bytes == 5900);
  alloc.deallocate(b, 900);
  alloc.deallocate(c, 5000);
  alloc.reset_peak();
  CHECK(alloc.stats().peak_live_bytes == 0);
  CHECK(alloc.allocate(0) == nullptr);
  alloc.deallocate(nullptr, 0);

  alloc.trim();
  s = alloc.stats();
  CHECK(s.cached_bytes == 0);
  CHECK(s.system_frees == 2);
  CHECK(s.allocations == 3);
}

TEST_CASE("a warm tensor workload makes no system allocation", "[runtime]") {
  auto workload = [] {
    for (std::int64_t n : {1, 7, 300, 512, 2048}) {
      Tensor a = Tensor::zeros({n, 4}, DType::f32);
      Tensor b = Tensor::full({n}, 1.0, DType::f64);
      Tensor c = a.clone();
    }
  };
  workload();  // cold: fills the pool
  const AllocatorStats before = cpu_allocator().stats();
  for (int i = 0; i < 10; ++i) workload();
  const AllocatorStats after = cpu_allocator().stats();
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.allocations - before.allocations == 10 * 5 * 3);
  CHECK(after.pool_hits - before.pool_hits == 10 * 5 * 3);
  CHECK(after.live_bytes == before.live_bytes);
}

TEST_CASE("the pool stops caching past its limit", "[runtime]") {
  PooledCpuAllocator alloc;
  alloc.set_max_cached_bytes(4096);
  void* a = alloc.allocate(4096);
  void* b = alloc.allocate(4096);
  alloc.deallocate(a, 4096);  // cached
  alloc.deallocate(b, 4096);  // over the limit: back to the system
  const AllocatorStats s = alloc.stats();
  CHECK(s.cached_bytes == 4096);
  CHECK(s.system_frees == 1);
}

TEST_CASE("the allocator is thread-safe", "[runtime]") {
  PooledCpuAllocator alloc;
  constexpr int kTasks = 64;
  oneapi::tbb::parallel_for(0, kTasks, [&](int task) {
    std::vector<std::pair<void*, std::size_t>> blocks;
    for (int i = 0; i < 200; ++i) {
      const std::size_t n = 64 + static_cast<std::size_t>((task * 131 + i * 17) % 5000);
      void* p = alloc.allocate(n);
      std::memset(p, task, n);  // ASan/TSan would see two owners of one block
      blocks.emplace_back(p, n);
      if (i % 3 == 0) {
        alloc.deallocate(blocks.back().first, blocks.back().second);
        blocks.pop_back();
      }
    }
    for (auto [p, n] : blocks) {
      REQUIRE(static_cast<unsigned char*>(p)[n - 1] == static_cast<unsigned char>(task));
      alloc.deallocate(p, n);
    }
  });
  const AllocatorStats s = alloc.stats();
  CHECK(s.live_bytes == 0);
  CHECK(s.allocations == kTasks * 200);
  CHECK(s.pool_hits + s.system_allocations == s.allocations);
}
