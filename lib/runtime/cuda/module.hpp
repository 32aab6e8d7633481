// PTX loaded into a GPU's context, and its kernels.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/cuda/context.hpp"

namespace nimble::cuda {

class Module {
 public:
  /// Loads `ptx` (PTX text; the driver compiles it for the device) with
  /// cuModuleLoadDataEx. Throws Error(runtime_error) naming `name` and
  /// carrying the driver's JIT error log when the driver rejects it.
  Module(std::shared_ptr<const Context> context, const std::string& ptx, std::string_view name);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The kernel `entry` (a .entry of the PTX). Throws Error(runtime_error)
  /// naming the module and the entry when there is none.
  [[nodiscard]] CUfunction function(const std::string& entry) const;

  [[nodiscard]] const Context& context() const noexcept { return *context_; }

 private:
  std::shared_ptr<const Context> context_;
  std::string name_;
  CUmodule module_ = nullptr;
};

}  // namespace nimble::cuda
