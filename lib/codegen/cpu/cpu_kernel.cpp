#include "codegen/cpu/cpu_kernel.hpp"

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "codegen/kernel_ir.hpp"
#include "codegen/kernel_store.hpp"
#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/jit.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/stored_kernel.hpp"
#include "runtime/native_kernel.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

namespace {

// A stored kernel's payload: its description, then its object file.
std::string payload_of(const runtime::NativeKernelDesc& desc, std::string_view object) {
  PayloadWriter w;
  runtime::write_desc(w, desc);
  w.bytes(object);
  return std::move(w).take();
}

// The kernel a payload holds, or null if it is malformed or does not fit
// `bucket` (the store's checksum held, so this is a bug or a foreign
// writer); throws if LLVM cannot link its object. A hit needs no lowering.
Ref<Kernel> load_payload(std::string_view payload, const std::string& prefix, const Bucket& bucket) {
  PayloadReader r(payload);
  std::optional<runtime::NativeKernelDesc> desc = runtime::read_desc(r);
  const std::string_view object = r.rest();
  if (!desc || object.empty() || (!bucket.dims.empty() && desc->bindings.size() != bucket.dims.size()))
    return {};
  const std::uint32_t num_stages = desc->num_stages;
  return runtime::make_native_kernel(std::move(*desc), link_host_code(prefix, object, num_stages));
}

// The host CPU's kernel.
EmittedKernel emit_for_host(const KernelIR& ir, llvm::LLVMContext& context, const std::string& prefix) {
  static const CpuEmitOptions host = CpuEmitOptions::for_vector_bits(vector_bits(jit_object_target()));
  return emit_cpu_kernel(ir, context, prefix, host);
}

// Compiles `ir` with symbols named from `prefix`; stores it under `key` when
// `store` is set.
Ref<Kernel> compile(const KernelIR& ir, const std::string& prefix, std::string_view bucket,
                    std::chrono::steady_clock::time_point start, const KernelStore* store,
                    std::uint64_t key, std::string_view identity) {
  std::string object;
  HostCode host = compile_host_code(ir, emit_for_host, prefix, &object);
  runtime::NativeKernelDesc desc = describe_native_kernel(ir, std::move(host.errors));
  if (store != nullptr) (void)store->save(key, identity, payload_of(desc, object));
  Ref<Kernel> kernel = runtime::make_native_kernel(std::move(desc), std::move(host.code));
  stats::count_kernel_compiled(ir.name, bucket, stats::nanoseconds_since(start));
  return kernel;
}

}  // namespace

std::string cpu_kernel_ir(const std::string& name, std::span<const te::Tensor> inputs,
                          std::span<const te::Tensor> outputs) {
  return to_string(lower_to_kernel_ir(name, inputs, outputs));
}

Ref<Kernel> compile_cpu_kernel(const std::string& name, std::span<const te::Tensor> inputs,
                               std::span<const te::Tensor> outputs, const Bucket& bucket) {
  const auto start = std::chrono::steady_clock::now();
  stats::begin_kernel_compile();
  KernelIR ir = lower_to_kernel_ir(name, inputs, outputs);
  if (!bucket.dims.empty()) specialize(ir, bucket);
  return compile(std::move(ir), unique_symbol_prefix(), bucket.dims.empty() ? "" : bucket.to_string(), start,
                 nullptr, 0, {});
}

HostKernelEmitter cpu_kernel_emitter(const CpuEmitOptions& options) {
  return [options](const KernelIR& k, llvm::LLVMContext& context, const std::string& prefix) {
    return emit_cpu_kernel(k, context, prefix, options);
  };
}

Ref<Kernel> compile_cpu_kernel_with(const std::string& name, std::span<const te::Tensor> inputs,
                                    std::span<const te::Tensor> outputs, const CpuEmitOptions& options) {
  const KernelIR ir = lower_to_kernel_ir(name, inputs, outputs);
  HostCode host = compile_host_code(ir, cpu_kernel_emitter(options));
  return runtime::make_native_kernel(describe_native_kernel(ir, std::move(host.errors)), std::move(host.code));
}

Ref<Kernel> cpu_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule, const Bucket& bucket,
                       const KernelStore* store) {
  const auto start = std::chrono::steady_clock::now();
  const std::string bucket_text = bucket.dims.empty() ? std::string() : bucket.to_string();
  // Everything the object depends on: a stored kernel is used only by the
  // same build of nimble (its code that lowers, emits and calls kernels) on
  // the same LLVM, for the same target, primitive and bucket.
  const std::string identity = kernel_identity(fmt::format("cpu kernel {}", jit_target_id()), prim, bucket_text);
  const std::uint64_t key = kernel_key(identity);
  const std::string prefix = fmt::format("nimble_{:016x}", key);
  if (Ref<Kernel> kernel = load_stored_kernel(store, key, identity, start, [&](std::string_view payload) {
        return load_payload(payload, prefix, bucket);
      }))
    return kernel;
  stats::begin_kernel_compile();  // a rejected entry's link is no phase of this compile
  KernelIR ir = lower_to_kernel_ir(prim.name, rule.inputs, rule.outputs);
  if (!bucket.dims.empty()) specialize(ir, bucket);
  return compile(std::move(ir), prefix, bucket_text, start, store, key, identity);
}

}  // namespace nimble::codegen
