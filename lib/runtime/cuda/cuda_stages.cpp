#include "runtime/cuda/cuda_stages.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "nimble/runtime/allocator.hpp"
#include "support/check.hpp"

namespace nimble::cuda {

CudaStages::CudaStages(std::shared_ptr<const Module> module, std::vector<std::string> entries,
                       std::vector<std::uint32_t> ranks, std::size_t num_buffers)
    : module_(std::move(module)), names_(std::move(entries)), ranks_(std::move(ranks)), num_buffers_(num_buffers) {
  for (const std::string& name : names_) entries_.push_back(module_->function(name));
}

Stream& CudaStages::own_stream() const {
  std::call_once(stream_made_, [&] {
    stream_ = std::make_unique<Stream>(std::shared_ptr<const Context>(module_, &module_->context()));
  });
  return *stream_;
}

Device CudaStages::device() const noexcept { return Device::cuda(module_->context().ordinal()); }

std::int32_t CudaStages::run(void* const* data, const std::int64_t* const* dims, const std::int64_t* sched,
                             std::array<std::int64_t, 4>& info) const {
  // The block, in 8-byte words: the buffers' addresses, the addresses of
  // the shapes (of inputs and outputs; 0 for temporaries), the shapes, info,
  // then the status word (an i32 in the low half).
  const std::size_t shapes_at = 2 * num_buffers_;
  std::size_t words = shapes_at;
  for (std::uint32_t r : ranks_) words += r;
  const std::size_t info_at = words;
  const std::size_t status_at = info_at + info.size();
  words = status_at + 1;
  std::vector<std::uint64_t> block(words, 0);
  Allocator& allocator = allocator_for(device());
  const std::size_t bytes = words * sizeof(std::uint64_t);
  void* on_device = allocator.allocate(bytes);
  const auto address = [&](std::size_t word) {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(on_device)) + word * sizeof(std::uint64_t);
  };
  for (std::size_t b = 0; b < num_buffers_; ++b) block[b] = reinterpret_cast<std::uintptr_t>(data[b]);
  std::size_t at = shapes_at;
  for (std::size_t b = 0; b < ranks_.size(); ++b) {
    block[num_buffers_ + b] = address(at);
    std::memcpy(&block[at], dims[b], ranks_[b] * sizeof(std::int64_t));
    at += ranks_[b];
  }
  std::int32_t status = 0;
  // The calling VM's stream for this GPU, if it has one.
  Stream* const scoped = scoped_stream(module_->context());
  Stream& stream = scoped != nullptr ? *scoped : own_stream();
  try {
    stream.copy_to_device(on_device, block.data(), bytes);
    std::uint64_t args[] = {address(0), address(num_buffers_), address(info_at), address(status_at), 0, 0};
    void* params[] = {&args[0], &args[1], &args[2], &args[3], &args[4], &args[5]};
    const auto most_blocks = static_cast<std::int64_t>(std::max(1, module_->context().multiprocessors()) * 32);
    for (std::size_t s = 0; s < entries_.size(); ++s) {
      const std::int64_t extent = sched[2 * s];
      if (extent <= 0) continue;
      args[5] = static_cast<std::uint64_t>(extent);
      // Threads an iteration takes (a warp for a reduction split across its
      // lanes, a block for a tile of a product). The entry divides the grid
      // by them itself, so that any grid computes every iteration: this
      // only sizes it.
      const std::int64_t lanes = std::clamp<std::int64_t>(sched[2 * s + 1], 1, kBlockThreads);
      const std::int64_t threads = extent > std::numeric_limits<std::int64_t>::max() / lanes
                                       ? std::numeric_limits<std::int64_t>::max()
                                       : extent * lanes;
      const std::int64_t blocks = std::min<std::int64_t>(most_blocks, (threads - 1) / kBlockThreads + 1);
      stream.launch(entries_[s], {.grid = {static_cast<unsigned>(blocks), 1, 1}, .block = {kBlockThreads, 1, 1}},
                      params, names_[s]);
    }
    std::array<std::uint64_t, 5> words_back{};
    stream.copy_to_host(words_back.data(), reinterpret_cast<void*>(address(info_at)), sizeof words_back);
    for (std::size_t k = 0; k < info.size(); ++k) info[k] = static_cast<std::int64_t>(words_back[k]);
    std::memcpy(&status, &words_back[info.size()], sizeof status);
  } catch (...) {
    allocator.deallocate(on_device, bytes);
    throw;
  }
  allocator.deallocate(on_device, bytes);
  return status;
}

}  // namespace nimble::cuda
