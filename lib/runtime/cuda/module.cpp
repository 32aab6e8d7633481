#include "runtime/cuda/module.hpp"

#include <array>
#include <cstdint>

#include "support/check.hpp"

namespace nimble::cuda {

Module::Module(std::shared_ptr<const Context> context, const std::string& ptx, std::string_view name)
    : context_(std::move(context)), name_(name) {
  const Driver& d = context_->driver();
  context_->make_current();
  std::array<char, 8192> log{};
  std::array<CUjit_option, 2> options{kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  // The driver reads a size option's value from the pointer's bits.
  std::array<void*, 2> values{log.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(log.size()))};
  const CUresult r = d.api().cuModuleLoadDataEx(&module_, ptx.c_str(), static_cast<unsigned>(options.size()),
                                                options.data(), values.data());
  if (r != kSuccess) {
    module_ = nullptr;
    log.back() = '\0';
    throw_error(ErrorKind::runtime_error, "CUDA: cuModuleLoadDataEx failed for {} on cuda:{} (sm_{}): {}{}{}", name_,
                context_->ordinal(), context_->compute_capability(), d.describe(r), log[0] != '\0' ? "\n" : "",
                log.data());
  }
}

Module::~Module() {
  if (module_ == nullptr) return;
  try {
    context_->make_current();
    (void)context_->driver().api().cuModuleUnload(module_);
  } catch (const Error&) {
    // The context is gone with the driver's state: nothing left to free.
  }
}

CUfunction Module::function(const std::string& entry) const {
  CUfunction f = nullptr;
  const Driver& d = context_->driver();
  const CUresult r = d.api().cuModuleGetFunction(&f, module_, entry.c_str());
  if (r != kSuccess)
    throw_error(ErrorKind::runtime_error, "CUDA: cuModuleGetFunction failed: {} has no kernel {}: {}", name_, entry,
                d.describe(r));
  return f;
}

}  // namespace nimble::cuda
