// A GPU kernel's stages (codegen/cuda/gpu_kernel.hpp's PTX entries) as a
// native kernel's StageRunner: the kernel's buffers' addresses, its shapes
// and the failure words go to the device in one block per call, each stage
// is launched over its extent, and the failure words come back at the end.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/module.hpp"
#include "runtime/cuda/stream.hpp"
#include "runtime/native_kernel.hpp"

namespace nimble::cuda {

class CudaStages final : public runtime::StageRunner {
 public:
  /// `entries`: the PTX entry of each stage, in `module`. `ranks`: the rank
  /// of each input and output buffer (the shapes the stages read), then
  /// `num_buffers` counts temporaries too.
  CudaStages(std::shared_ptr<const Module> module, std::vector<std::string> entries, std::vector<std::uint32_t> ranks,
             std::size_t num_buffers);

  [[nodiscard]] Device device() const noexcept override;
  std::int32_t run(void* const* data, const std::int64_t* const* dims, const std::int64_t* sched,
                   std::array<std::int64_t, 4>& info) const override;

  /// Threads per block of every launch: whole warps, and the threads of a
  /// product's tile (codegen::GpuProductTile::kThreads), the most a stage's
  /// iteration takes (its schedule's second word: codegen/cuda/gpu_kernel.hpp).
  static constexpr unsigned kBlockThreads = 256;

 private:
  std::shared_ptr<const Module> module_;
  std::vector<std::string> names_;
  std::vector<CUfunction> entries_;
  std::vector<std::uint32_t> ranks_;
  std::size_t num_buffers_;
  // The kernel's launches go on the calling VM's stream (scoped_stream),
  // or, called from outside a VM, on one of its own, made then (calls from
  // several threads ordered on it). Each run waits for its launches (it
  // reads the status back), which is what orders them with copies on other
  // streams.
  Stream& own_stream() const;
  mutable std::once_flag stream_made_;
  mutable std::unique_ptr<Stream> stream_;
};

}  // namespace nimble::cuda
