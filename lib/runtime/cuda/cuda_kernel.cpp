#include "runtime/cuda/cuda_kernel.hpp"

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_stages.hpp"
#include "runtime/cuda/module.hpp"
#include "runtime/stats_counters.hpp"

namespace nimble::cuda {

Ref<Kernel> make_cuda_kernel(runtime::NativeKernelDesc desc, runtime::NativeCode prologue, const std::string& ptx,
                             const std::string& entry_prefix, std::shared_ptr<const Context> context) {
  const auto loading = std::chrono::steady_clock::now();
  auto module = std::make_shared<const Module>(std::move(context), ptx, desc.name);
  stats::add_compile_phase(stats::CompilePhase::link, stats::nanoseconds_since(loading));
  std::vector<std::string> entries = runtime::native_symbols(entry_prefix, desc.num_stages);
  entries.erase(entries.begin());  // the prologue's: it runs on the host
  // The stages read the shapes of the inputs and outputs; temporaries are
  // counted in the buffers.
  std::vector<std::uint32_t> ranks;
  for (std::size_t b = 0; b < desc.num_inputs + desc.num_outputs; ++b) ranks.push_back(desc.buffers[b].rank);
  auto stages = std::make_shared<const CudaStages>(std::move(module), std::move(entries), std::move(ranks),
                                                   desc.buffers.size());
  prologue.stages.clear();
  return runtime::make_native_kernel(std::move(desc), std::move(prologue), std::move(stages));
}

}  // namespace nimble::cuda
