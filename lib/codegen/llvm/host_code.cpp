#include "codegen/llvm/host_code.hpp"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <chrono>
#include <memory>

#include "codegen/kernel_ir.hpp"
#include "codegen/llvm/jit.hpp"
#include "runtime/stats_counters.hpp"

namespace nimble::codegen {

runtime::NativeKernelDesc describe_native_kernel(const KernelIR& ir, std::vector<ErrorSite> errors) {
  runtime::NativeKernelDesc d;
  d.name = ir.name;
  d.num_inputs = static_cast<std::uint32_t>(ir.num_inputs);
  d.num_outputs = static_cast<std::uint32_t>(ir.num_outputs);
  for (const Buffer& b : ir.buffers)
    d.buffers.push_back({b.tensor.name(), b.tensor.dtype(), static_cast<std::uint32_t>(b.tensor.ndim())});
  for (const KernelIR::Binding& b : ir.bindings)
    d.bindings.push_back({te::to_string(b.var), static_cast<std::uint32_t>(b.buffer), static_cast<std::uint32_t>(b.dim)});
  for (const KernelIR::DimCheck& c : ir.input_dims)
    if (c.expected.kind() == te::ExprKind::int_imm)
      d.constant_input_dims.push_back({static_cast<std::uint32_t>(c.buffer), static_cast<std::uint32_t>(c.dim)});
  d.num_stages = static_cast<std::uint32_t>(ir.stages.size());
  d.errors = std::move(errors);
  return d;
}

HostCode compile_host_code(const KernelIR& ir, const HostKernelEmitter& emit, const std::string& prefix,
                           std::string* object) {
  const std::string symbols = prefix.empty() ? unique_symbol_prefix() : prefix;
  auto context = std::make_unique<llvm::LLVMContext>();
  EmittedKernel emitted = emit(ir, *context, symbols);
  const auto num_stages = static_cast<std::uint32_t>(emitted.stages.size());
  std::string bytes = compile_to_object(std::move(context), std::move(emitted.module));
  runtime::NativeCode code = link_host_code(symbols, bytes, num_stages);
  if (object != nullptr) *object = std::move(bytes);
  return {std::move(code), std::move(emitted.errors)};
}

runtime::NativeCode link_host_code(const std::string& prefix, std::string_view object, std::uint32_t num_stages) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const JitCode> code = jit_link(prefix, object, runtime::native_symbols(prefix, num_stages));
  stats::add_compile_phase(stats::CompilePhase::link, stats::nanoseconds_since(start));
  const std::vector<void*>& at = code->addresses();
  return {at[0], std::vector<void*>(at.begin() + 1, at.end()), std::move(code)};
}

}  // namespace nimble::codegen
