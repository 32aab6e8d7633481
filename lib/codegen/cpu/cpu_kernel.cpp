#include "codegen/cpu/cpu_kernel.hpp"

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "codegen/cpu/jit.hpp"
#include "codegen/cpu/kernel_emitter.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/kernel_store.hpp"
#include "runtime/native_kernel.hpp"
#include "nimble/version.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"

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

namespace {

// A kernel running `code`, linked by the JIT.
Ref<Kernel> jit_kernel(const KernelIR& ir, std::vector<ErrorSite> errors, std::unique_ptr<JitCode> code) {
  const std::vector<void*>& at = code->addresses();
  runtime::NativeCode native{at[0], std::vector<void*>(at.begin() + 1, at.end()), {}};
  native.owner = std::shared_ptr<const JitCode>(std::move(code));
  return runtime::make_native_kernel(describe_native_kernel(ir, std::move(errors)), std::move(native));
}

// The symbols of a kernel emitted with `prefix` (kernel_emitter.hpp).
std::vector<std::string> symbols_of(const std::string& prefix, std::size_t num_stages) {
  return runtime::native_symbols(prefix, static_cast<std::uint32_t>(num_stages));
}

// A stored kernel's payload: its error table, then its object file.
std::string payload_of(const std::vector<ErrorSite>& errors, std::size_t num_stages, std::string_view object) {
  PayloadWriter w;
  w.u32(static_cast<std::uint32_t>(num_stages));
  w.u32(static_cast<std::uint32_t>(errors.size()));
  for (const ErrorSite& e : errors) {
    w.u32(static_cast<std::uint32_t>(e.form));
    w.u32(static_cast<std::uint32_t>(e.kind));
    w.i32(e.buffer);
    w.i32(e.dim);
    w.str(e.text);
    w.str(e.stage);
  }
  w.bytes(object);
  return std::move(w).take();
}

// The kernel a payload holds for `ir`, or null if the payload does not fit
// it (the store's checksum held, so this is a bug or a foreign writer).
// Takes `ir` only when it returns a kernel: after null or a throw (an object
// LLVM cannot link) the caller compiles it.
Ref<Kernel> load_payload(KernelIR& ir, std::string_view payload, const std::string& prefix) {
  PayloadReader r(payload);
  const std::uint32_t num_stages = r.u32();
  const std::uint32_t num_errors = r.u32();
  if (r.failed() || num_stages != ir.stages.size() || num_errors > payload.size()) return {};
  std::vector<ErrorSite> errors(num_errors);
  for (ErrorSite& e : errors) {
    const std::uint32_t form = r.u32();
    const std::uint32_t kind = r.u32();
    if (form > static_cast<std::uint32_t>(ErrorSite::Form::index) ||
        kind > static_cast<std::uint32_t>(ErrorKind::runtime_error))
      return {};
    e.form = static_cast<ErrorSite::Form>(form);
    e.kind = static_cast<ErrorKind>(kind);
    e.buffer = r.i32();
    e.dim = r.i32();
    e.text = r.str();
    e.stage = r.str();
    // fail() indexes the kernel's buffers and their dims with these.
    if (e.form == ErrorSite::Form::input_dim || e.form == ErrorSite::Form::output_dim) {
      if (e.buffer < 0 || static_cast<std::size_t>(e.buffer) >= ir.buffers.size() || e.dim < 0 ||
          static_cast<std::size_t>(e.dim) >= ir.buffers[static_cast<std::size_t>(e.buffer)].tensor.ndim())
        return {};
    }
  }
  const std::string_view object = r.rest();
  if (r.failed() || object.empty()) return {};
  std::unique_ptr<JitCode> code = jit_link(prefix, object, symbols_of(prefix, num_stages));
  return jit_kernel(ir, std::move(errors), std::move(code));
}

std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// Compiles `ir` with symbols named from `prefix`; stores it under `key` when
// `store` is set.
Ref<Kernel> compile(KernelIR ir, const std::string& prefix, std::string_view bucket,
                    std::chrono::steady_clock::time_point start, const KernelStore* store,
                    std::uint64_t key, std::string_view identity) {
  auto context = std::make_unique<llvm::LLVMContext>();
  EmittedKernel emitted = emit_cpu_kernel(ir, *context, prefix);
  const std::string object = compile_to_object(std::move(context), std::move(emitted.module));
  std::unique_ptr<JitCode> code = jit_link(prefix, object, symbols_of(prefix, ir.stages.size()));
  if (store != nullptr) (void)store->save(key, identity, payload_of(emitted.errors, ir.stages.size(), object));
  std::string name = ir.name;
  Ref<Kernel> kernel = jit_kernel(ir, std::move(emitted.errors), std::move(code));
  stats::count_kernel_compiled(name, bucket, nanoseconds_since(start));
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
  KernelIR ir = lower_to_kernel_ir(name, inputs, outputs);
  if (!bucket.dims.empty()) specialize(ir, bucket);
  return compile(std::move(ir), unique_symbol_prefix(), bucket.dims.empty() ? "" : bucket.to_string(), start,
                 nullptr, 0, {});
}

Ref<Kernel> cpu_kernel(const PrimitiveInfo& prim, const PrimitiveRule& rule, const Bucket& bucket,
                       const KernelStore* store) {
  const auto start = std::chrono::steady_clock::now();
  KernelIR ir = lower_to_kernel_ir(prim.name, rule.inputs, rule.outputs);
  const std::string bucket_text = bucket.dims.empty() ? std::string() : bucket.to_string();
  if (!bucket.dims.empty()) specialize(ir, bucket);
  // Everything the object depends on: a stored kernel is used only by the
  // same build of nimble (its code that lowers, emits and calls kernels) on
  // the same LLVM, for the same target, primitive and bucket.
  const std::string identity =
      fmt::format("nimble {} build {}\nllvm {}\ncpu kernel {}\nbucket {}\n{} {}\n", kVersion,
                  library_build_id(), LLVM_VERSION_STRING, jit_target_id(), bucket_text,
                  prim.kind == PrimitiveKind::compute ? "compute" : "shape_function", prim.source);
  const std::uint64_t key = kernel_key(identity);
  const std::string prefix = fmt::format("nimble_{:016x}", key);
  if (store != nullptr) {
    if (std::optional<std::string> payload = store->load(key, identity)) {
      Ref<Kernel> kernel;
      try {
        kernel = load_payload(ir, *payload, prefix);
      } catch (const Error&) {
        // An object LLVM cannot link: rejected like a corrupt file, and
        // replaced below.
      }
      if (kernel) {
        stats::count_disk_hit(nanoseconds_since(start));
        return kernel;
      }
      stats::count_disk_rejected();
    }
  }
  return compile(std::move(ir), prefix, bucket_text, start, store, key, identity);
}

}  // namespace nimble::codegen
