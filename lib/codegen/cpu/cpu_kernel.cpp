#include "codegen/cpu/cpu_kernel.hpp"

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "codegen/cpu/jit.hpp"
#include "codegen/cpu/kernel_emitter.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/kernel_store.hpp"
#include "nimble/version.hpp"
#include "nimble/runtime/storage.hpp"
#include "nimble/runtime/threading.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

namespace {

using PrologueFn = std::int32_t (*)(void* const*, const std::int64_t* const*, std::int64_t*, std::int64_t*);
using StageFn = std::int32_t (*)(void* const*, const std::int64_t* const*, std::int64_t*, std::int64_t,
                                 std::int64_t);

// Below this many element operations a stage runs on the calling thread:
// handing work to oneTBB costs microseconds.
constexpr std::int64_t kParallelWork = 1 << 16;
// Each thread's share is at least this much work.
constexpr std::int64_t kGrainWork = 1 << 14;

// Up to this many buffers and schedule slots live on the stack, and are not
// zeroed: the prologue writes every slot the stages read.
constexpr std::size_t kInlineSlots = 16;

template <class T>
class SmallArray {
 public:
  explicit SmallArray(std::size_t n) {
    if (n > kInlineSlots) heap_ = std::make_unique<T[]>(n);
  }
  T* data() noexcept { return heap_ ? heap_.get() : inline_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }

 private:
  T inline_[kInlineSlots];
  std::unique_ptr<T[]> heap_;
};

class CpuKernel final : public Kernel {
 public:
  CpuKernel(KernelIR ir, std::vector<ErrorSite> errors, std::unique_ptr<JitCode> code)
      : ir_(std::move(ir)), errors_(std::move(errors)), code_(std::move(code)) {
    const std::vector<void*>& at = code_->addresses();
    prologue_ = reinterpret_cast<PrologueFn>(at[0]);
    for (std::size_t s = 1; s < at.size(); ++s) stages_.push_back(reinterpret_cast<StageFn>(at[s]));
    for (const Buffer& b : ir_.buffers) {
      if (b.role == Buffer::Role::temp) ++num_temps_;
      signatures_.push_back({b.tensor.dtype(), b.tensor.ndim()});
    }
    for (const KernelIR::Binding& b : ir_.bindings)
      dynamic_dims_.push_back({static_cast<std::uint32_t>(b.buffer), static_cast<std::uint32_t>(b.dim)});
  }

  std::span<const DynamicDim> dynamic_dims() const noexcept override { return dynamic_dims_; }

  using Kernel::run;

  void run(TensorRefs inputs, TensorRefs outputs) const override {
    const auto num_in = static_cast<std::size_t>(ir_.num_inputs);
    const auto num_out = static_cast<std::size_t>(ir_.num_outputs);
    if (inputs.size() != num_in || outputs.size() != num_out)
      throw_error(ErrorKind::invalid_argument, "{}: expected {} inputs and {} outputs, got {} and {}",
                  ir_.name, num_in, num_out, inputs.size(), outputs.size());
    const std::size_t num_buffers = ir_.buffers.size();
    SmallArray<void*> data(num_buffers);
    SmallArray<const std::int64_t*> dims(num_buffers);
    for (std::size_t i = 0; i < num_in + num_out; ++i) {
      const Tensor& t = i < num_in ? *inputs[i] : *outputs[i - num_in];
      const Signature& expected = signatures_[i];
      if (t.dtype() != expected.dtype || t.rank() != expected.rank) [[unlikely]]
        mismatch(t, i, num_in);
      data[i] = host_data(t, i, num_in);
      dims[i] = t.shape().begin();
    }
    const std::size_t num_sched = 2 * stages_.size() + num_temps_;
    SmallArray<std::int64_t> sched(num_sched);
    std::array<std::int64_t, 4> info{};
    if (const std::int32_t code = prologue_(data.data(), dims.data(), info.data(), sched.data()))
      fail(code, info, inputs, outputs);

    if (num_temps_ == 0) {
      for (std::size_t s = 0; s < stages_.size(); ++s)
        run_stage(s, sched[2 * s], sched[2 * s + 1], data.data(), dims.data(), inputs, outputs);
      return;
    }
    // Temporaries (stages a fused kernel materializes), from the pool; held
    // until the last stage is done.
    SmallArray<Tensor> temps(num_temps_);
    std::size_t slot = 2 * stages_.size();
    for (std::size_t b = num_in + num_out, k = 0; b < num_buffers; ++b, ++k) {
      const std::int64_t n = sched[slot++];
      if (n < 0)
        throw_error(ErrorKind::runtime_error, "{}: the temporary {} would have {} elements", ir_.name,
                    ir_.buffers[b].tensor.name(), n);
      temps[k] = Tensor::empty(Shape{n}, ir_.buffers[b].tensor.dtype());
      data[b] = temps[k].raw_data();
    }
    for (std::size_t s = 0; s < stages_.size(); ++s)
      run_stage(s, sched[2 * s], sched[2 * s + 1], data.data(), dims.data(), inputs, outputs);
  }

  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    std::size_t n = 0;
    for (const Value& v : inputs) n += count_tensors(v);
    SmallArray<const Tensor*> tensors(n);
    std::size_t k = 0;
    for (const Value& v : inputs) flatten(v, tensors.data(), k);
    run(std::span<const Tensor* const>(tensors.data(), n), outputs);
  }

 private:
  static std::size_t count_tensors(const Value& v) {
    if (v.is_tensor()) return 1;
    std::size_t n = 0;
    for (const Value& f : v.fields()) n += count_tensors(f);
    return n;
  }
  static void flatten(const Value& v, const Tensor** out, std::size_t& k) {
    if (v.is_tensor()) {
      out[k++] = &v.tensor();
      return;
    }
    for (const Value& f : v.fields()) flatten(f, out, k);
  }

  void run_stage(std::size_t s, std::int64_t extent, std::int64_t work, void* const* data,
                 const std::int64_t* const* dims, TensorRefs inputs, TensorRefs outputs) const {
    const StageFn fn = stages_[s];
    if (work < kParallelWork || extent < 2 || num_threads() < 2) {
      std::array<std::int64_t, 4> info{};
      if (const std::int32_t code = fn(data, dims, info.data(), 0, extent))
        fail(code, info, inputs, outputs);
      return;
    }
    const std::int64_t grain = std::max<std::int64_t>(1, extent * kGrainWork / work);
    std::atomic<std::int32_t> failed{0};
    std::mutex failure_mutex;
    std::array<std::int64_t, 4> failure_info{};
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, extent, grain),
                      [&](const tbb::blocked_range<std::int64_t>& r) {
                        if (failed.load(std::memory_order_relaxed) != 0) return;
                        std::array<std::int64_t, 4> info{};
                        if (const std::int32_t code = fn(data, dims, info.data(), r.begin(), r.end())) {
                          std::lock_guard lock(failure_mutex);
                          if (failed.load() == 0) {
                            failure_info = info;
                            failed.store(code);
                          }
                        }
                      });
    if (const std::int32_t code = failed.load()) fail(code, failure_info, inputs, outputs);
  }

  // The first element of `t`, buffer `i` (the kernel writes the outputs):
  // Tensor::raw_data's checks, less its dtype test (the caller made it).
  void* host_data(const Tensor& t, std::size_t i, std::size_t num_in) const {
    const Ref<Storage>& storage = t.storage();
    if (!storage || !storage->host_accessible()) [[unlikely]]
      not_on_host(t, i, num_in);
    return static_cast<std::byte*>(storage->data()) + t.byte_offset();
  }

  [[noreturn]] void not_on_host(const Tensor& t, std::size_t i, std::size_t num_in) const {
    const te::Tensor& p = ir_.buffers[i].tensor;
    if (!t.storage())
      throw_error(ErrorKind::invalid_argument, "{}: {} {} is an undefined tensor", ir_.name,
                  i < num_in ? "input" : "output", p.name());
    throw_error(ErrorKind::invalid_argument, "{}: {} {} is on {}, not on the host", ir_.name,
                i < num_in ? "input" : "output", p.name(), to_string(t.device()));
  }

  [[noreturn]] void mismatch(const Tensor& t, std::size_t i, std::size_t num_in) const {
    const te::Tensor& p = ir_.buffers[i].tensor;
    if (i >= num_in)
      throw_error(ErrorKind::runtime_error, "{}: output {} was allocated as {}{}, the kernel writes {} of rank {}",
                  ir_.name, p.name(), to_string(t.dtype()), to_string(t.shape()), to_string(p.dtype()),
                  p.ndim());
    if (t.dtype() != p.dtype())
      throw_error(ErrorKind::type_error, "{} must be {}, got {}", p.name(), to_string(p.dtype()),
                  to_string(t.dtype()));
    throw_error(ErrorKind::invalid_argument, "{} must have rank {}, got {}", p.name(), p.ndim(),
                to_string(t.shape()));
  }

  // The Error of failure `code`, worded as the reference evaluator words it.
  [[noreturn]] void fail(std::int32_t code, const std::array<std::int64_t, 4>& info,
                         TensorRefs inputs, TensorRefs outputs) const {
    const ErrorSite& site = errors_.at(static_cast<std::size_t>(code - 1));
    const auto tensor = [&](int b) -> const Tensor& {
      const auto i = static_cast<std::size_t>(b);
      return i < inputs.size() ? *inputs[i] : *outputs[i - inputs.size()];
    };
    switch (site.form) {
      case ErrorSite::Form::message:
        throw Error(site.kind, site.text);
      case ErrorSite::Form::input_dim: {
        const Tensor& t = tensor(site.buffer);
        const te::Tensor& p = ir_.buffers[static_cast<std::size_t>(site.buffer)].tensor;
        const std::int64_t actual = t.shape()[static_cast<std::size_t>(site.dim)];
        for (const KernelIR::Binding& b : ir_.bindings)
          if (te::to_string(b.var) == site.text)
            throw_error(site.kind, "{} {} has {} at dim {} but {} is {} (from {} dim {})", p.name(),
                        to_string(t.shape()), actual, site.dim, site.text, info[0],
                        ir_.buffers[static_cast<std::size_t>(b.buffer)].tensor.name(), b.dim);
        for (const KernelIR::DimCheck& c : ir_.input_dims)
          if (c.buffer == site.buffer && c.dim == site.dim && c.expected.kind() == te::ExprKind::int_imm)
            throw_error(site.kind, "{} {} has {} at dim {}, expected {}", p.name(), to_string(t.shape()),
                        actual, site.dim, info[0]);
        throw_error(site.kind, "{} {} has {} at dim {} but {} is {}", p.name(), to_string(t.shape()),
                    actual, site.dim, site.text, info[0]);
      }
      case ErrorSite::Form::output_dim: {
        const Tensor& t = tensor(site.buffer);
        throw_error(site.kind, "{}: output {} was allocated as {}, but its dim {} is {} ({})", ir_.name,
                    ir_.buffers[static_cast<std::size_t>(site.buffer)].tensor.name(), to_string(t.shape()),
                    site.dim, info[0], site.text);
      }
      case ErrorSite::Form::index:
        throw_error(site.kind, "{}: index {} is out of range for axis {} of {} (extent {})", site.stage,
                    info[0], site.dim, site.text, info[1]);
    }
    throw Error(site.kind, site.text);
  }

  KernelIR ir_;
  std::vector<ErrorSite> errors_;
  std::unique_ptr<JitCode> code_;
  PrologueFn prologue_ = nullptr;
  std::vector<StageFn> stages_;
  std::size_t num_temps_ = 0;
  // Each buffer's dtype and rank, read on every call.
  struct Signature {
    DType dtype;
    std::size_t rank;
  };
  std::vector<Signature> signatures_;
  std::vector<DynamicDim> dynamic_dims_;
};

// The symbols of a kernel emitted with `prefix` (kernel_emitter.hpp).
std::vector<std::string> symbols_of(const std::string& prefix, std::size_t num_stages) {
  std::vector<std::string> symbols{prefix + "_prologue"};
  for (std::size_t s = 0; s < num_stages; ++s) symbols.push_back(fmt::format("{}_stage{}", prefix, s));
  return symbols;
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
  return make_ref<CpuKernel>(std::move(ir), std::move(errors), std::move(code));
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
  Ref<Kernel> kernel = make_ref<CpuKernel>(std::move(ir), std::move(emitted.errors), std::move(code));
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
