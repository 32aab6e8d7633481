#include "runtime/native_kernel.hpp"

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>

#include "nimble/runtime/storage.hpp"
#include "nimble/runtime/threading.hpp"
#include "support/check.hpp"

namespace nimble::runtime {

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
// More than this many is a corrupt description (and bounds the allocation).
constexpr std::size_t kMaxSlots = std::size_t{1} << 20;

// No kernel has tensors of more dims than this; a description that says so is corrupt.
constexpr std::uint32_t kMaxRank = 64;

template <class T>
class SmallArray {
 public:
  explicit SmallArray(std::size_t n) {
    if (n > kMaxSlots) [[unlikely]]
      throw_error(ErrorKind::runtime_error, "a kernel of {} buffers or schedule slots (at most {})", n, kMaxSlots);
    if (n > kInlineSlots) heap_ = std::make_unique<T[]>(n);
  }
  T* data() noexcept { return heap_ ? heap_.get() : inline_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }

 private:
  T inline_[kInlineSlots];
  std::unique_ptr<T[]> heap_;
};

class NativeKernel final : public Kernel {
 public:
  NativeKernel(NativeKernelDesc desc, NativeCode code, std::shared_ptr<const StageRunner> runner)
      : desc_(std::move(desc)), code_(std::move(code)), runner_(std::move(runner)) {
    NIMBLE_ASSERT(code_.prologue != nullptr && (runner_ || code_.stages.size() == desc_.num_stages),
                  "a native kernel has a prologue and its stages");
    prologue_ = reinterpret_cast<PrologueFn>(code_.prologue);
    for (void* s : code_.stages) stages_.push_back(reinterpret_cast<StageFn>(s));
    num_temps_ = desc_.buffers.size() - desc_.num_inputs - desc_.num_outputs;
    for (const NativeKernelDesc::Binding& b : desc_.bindings) dynamic_dims_.push_back({b.buffer, b.dim});
    for (std::size_t i = 0; i < std::size_t{desc_.num_inputs} + desc_.num_outputs; ++i)
      expected_.push_back({desc_.buffers[i].dtype, desc_.buffers[i].rank});
    inline_call_ = num_temps_ == 0 && !runner_ && desc_.buffers.size() <= kInlineSlots &&
                   2 * std::size_t{desc_.num_stages} <= kInlineSlots;
  }

  std::span<const DynamicDim> dynamic_dims() const noexcept override { return dynamic_dims_; }

  using Kernel::run;

  void run(TensorRefs inputs, TensorRefs outputs) const override {
    const std::size_t num_in = desc_.num_inputs;
    const std::size_t num_out = desc_.num_outputs;
    if (inputs.size() != num_in || outputs.size() != num_out)
      throw_error(ErrorKind::invalid_argument, "{}: expected {} inputs and {} outputs, got {} and {}",
                  desc_.name, num_in, num_out, inputs.size(), outputs.size());
    if (inline_call_) [[likely]] {
      run_inline(inputs, outputs);
      return;
    }
    const std::size_t num_buffers = desc_.buffers.size();
    SmallArray<void*> data(num_buffers);
    SmallArray<const std::int64_t*> dims(num_buffers);
    for (std::size_t i = 0; i < num_in + num_out; ++i) {
      const Tensor& t = i < num_in ? *inputs[i] : *outputs[i - num_in];
      const NativeKernelDesc::Buffer& expected = desc_.buffers[i];
      if (t.dtype() != expected.dtype || t.rank() != expected.rank) [[unlikely]]
        mismatch(t, i);
      data[i] = host_data(t, i);
      dims[i] = t.shape().begin();
    }
    const std::size_t num_sched = 2 * std::size_t{desc_.num_stages} + num_temps_;
    SmallArray<std::int64_t> sched(num_sched);
    std::array<std::int64_t, 4> info{};
    if (const std::int32_t code = prologue_(data.data(), dims.data(), info.data(), sched.data()))
      fail(code, info, inputs, outputs);

    if (num_temps_ == 0 && !runner_) {
      for (std::size_t s = 0; s < stages_.size(); ++s)
        run_stage(s, sched[2 * s], sched[2 * s + 1], data.data(), dims.data(), inputs, outputs);
      return;
    }
    // Temporaries (stages a fused kernel materializes), from the pool of
    // the kernel's device; held until the last stage is done.
    SmallArray<Tensor> temps(num_temps_);
    std::size_t slot = 2 * std::size_t{desc_.num_stages};
    for (std::size_t b = num_in + num_out, k = 0; b < num_buffers; ++b, ++k) {
      const std::int64_t n = sched[slot++];
      if (n < 0)
        throw_error(ErrorKind::runtime_error, "{}: the temporary {} would have {} elements", desc_.name,
                    desc_.buffers[b].name, n);
      const DType dtype = desc_.buffers[b].dtype;
      if (runner_) {
        temps[k] = Tensor::view_of(
            Storage::allocate(static_cast<std::size_t>(n) * dtype_size(dtype), runner_->device()),
            Shape{n}, dtype);
        data[b] = temps[k].storage()->data();
      } else {
        temps[k] = Tensor::empty(Shape{n}, dtype);
        data[b] = temps[k].raw_data();
      }
    }
    if (runner_) {
      std::array<std::int64_t, 4> failure{};
      if (const std::int32_t code = runner_->run(data.data(), dims.data(), sched.data(), failure))
        fail(code, failure, inputs, outputs);
      return;
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
  // What buffer i (an input or output) must be.
  struct Expected {
    DType dtype;
    std::uint32_t rank;
  };

  // run() for a kernel of no temporaries and its own stages (most): its
  // buffers and schedule in arrays on the stack, nothing else set up.
  void run_inline(TensorRefs inputs, TensorRefs outputs) const {
    std::array<void*, kInlineSlots> data;
    std::array<const std::int64_t*, kInlineSlots> dims;
    std::array<std::int64_t, kInlineSlots> sched;
    const std::size_t num_in = inputs.size();
    const auto bind = [&](const Tensor& t, std::size_t i) {
      if (t.dtype() != expected_[i].dtype || t.rank() != expected_[i].rank) [[unlikely]]
        mismatch(t, i);
      data[i] = host_data(t, i);
      dims[i] = t.shape().begin();
    };
    for (std::size_t i = 0; i < num_in; ++i) bind(*inputs[i], i);
    for (std::size_t i = 0; i < outputs.size(); ++i) bind(*outputs[i], num_in + i);
    std::array<std::int64_t, 4> info{};
    if (const std::int32_t code = prologue_(data.data(), dims.data(), info.data(), sched.data()))
      fail(code, info, inputs, outputs);
    for (std::size_t s = 0; s < stages_.size(); ++s)
      run_stage(s, sched[2 * s], sched[2 * s + 1], data.data(), dims.data(), inputs, outputs);
  }

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
                      },
                      tbb::static_partitioner());
    if (const std::int32_t code = failed.load()) fail(code, failure_info, inputs, outputs);
  }

  // The first element of `t`, buffer `i` (the kernel writes the outputs):
  // Tensor::raw_data's checks, less its dtype test (the caller made it).
  // With a stage runner: its address on the runner's device.
  void* host_data(const Tensor& t, std::size_t i) const {
    const Ref<Storage>& storage = t.storage();
    if (!storage || (runner_ ? storage->device() != runner_->device() : !storage->host_accessible())) [[unlikely]]
      not_on_host(t, i);
    return static_cast<std::byte*>(storage->data()) + t.byte_offset();
  }

  [[noreturn]] void not_on_host(const Tensor& t, std::size_t i) const {
    const char* const role = i < desc_.num_inputs ? "input" : "output";
    if (!t.storage())
      throw_error(ErrorKind::invalid_argument, "{}: {} {} is an undefined tensor", desc_.name, role,
                  desc_.buffers[i].name);
    throw_error(ErrorKind::invalid_argument, "{}: {} {} is on {}, not on {}", desc_.name, role,
                desc_.buffers[i].name, to_string(t.device()), runner_ ? to_string(runner_->device()) : "the host");
  }

  [[noreturn]] void mismatch(const Tensor& t, std::size_t i) const {
    const NativeKernelDesc::Buffer& p = desc_.buffers[i];
    if (i >= desc_.num_inputs)
      throw_error(ErrorKind::runtime_error, "{}: output {} was allocated as {}{}, the kernel writes {} of rank {}",
                  desc_.name, p.name, to_string(t.dtype()), to_string(t.shape()), to_string(p.dtype), p.rank);
    if (t.dtype() != p.dtype)
      throw_error(ErrorKind::type_error, "{} must be {}, got {}", p.name, to_string(p.dtype), to_string(t.dtype()));
    throw_error(ErrorKind::invalid_argument, "{} must have rank {}, got {}", p.name, p.rank, to_string(t.shape()));
  }

  // The Error of failure `code`, worded as the reference evaluator words it.
  [[noreturn]] void fail(std::int32_t code, const std::array<std::int64_t, 4>& info, TensorRefs inputs,
                         TensorRefs outputs) const {
    const ErrorSite& site = desc_.errors.at(static_cast<std::size_t>(code - 1));
    const auto tensor = [&](int b) -> const Tensor& {
      const auto i = static_cast<std::size_t>(b);
      return i < inputs.size() ? *inputs[i] : *outputs[i - inputs.size()];
    };
    switch (site.form) {
      case ErrorSite::Form::message:
        throw Error(site.kind, site.text);
      case ErrorSite::Form::input_dim: {
        const Tensor& t = tensor(site.buffer);
        const std::string& name = desc_.buffers[static_cast<std::size_t>(site.buffer)].name;
        const std::int64_t actual = t.shape()[static_cast<std::size_t>(site.dim)];
        for (const NativeKernelDesc::Binding& b : desc_.bindings)
          if (b.var == site.text)
            throw_error(site.kind, "{} {} has {} at dim {} but {} is {} (from {} dim {})", name,
                        to_string(t.shape()), actual, site.dim, site.text, info[0], desc_.buffers[b.buffer].name,
                        b.dim);
        for (const DynamicDim& c : desc_.constant_input_dims)
          if (c.argument == static_cast<std::uint32_t>(site.buffer) && c.dim == static_cast<std::uint32_t>(site.dim))
            throw_error(site.kind, "{} {} has {} at dim {}, expected {}", name, to_string(t.shape()), actual,
                        site.dim, info[0]);
        throw_error(site.kind, "{} {} has {} at dim {} but {} is {}", name, to_string(t.shape()), actual, site.dim,
                    site.text, info[0]);
      }
      case ErrorSite::Form::output_dim: {
        const Tensor& t = tensor(site.buffer);
        throw_error(site.kind, "{}: output {} was allocated as {}, but its dim {} is {} ({})", desc_.name,
                    desc_.buffers[static_cast<std::size_t>(site.buffer)].name, to_string(t.shape()), site.dim,
                    info[0], site.text);
      }
      case ErrorSite::Form::index:
        throw_error(site.kind, "{}: index {} is out of range for axis {} of {} (extent {})", site.stage, info[0],
                    site.dim, site.text, info[1]);
    }
    throw Error(site.kind, site.text);
  }

  NativeKernelDesc desc_;
  NativeCode code_;
  std::shared_ptr<const StageRunner> runner_;
  PrologueFn prologue_ = nullptr;
  std::vector<StageFn> stages_;
  std::size_t num_temps_ = 0;
  std::vector<DynamicDim> dynamic_dims_;
  std::vector<Expected> expected_;  // of the inputs and outputs
  bool inline_call_ = false;        // run_inline serves every call
};

}  // namespace

void write_desc(PayloadWriter& w, const NativeKernelDesc& d) {
  w.str(d.name);
  w.u32(d.num_inputs);
  w.u32(d.num_outputs);
  w.u32(static_cast<std::uint32_t>(d.buffers.size()));
  for (const NativeKernelDesc::Buffer& b : d.buffers) {
    w.str(b.name);
    w.u32(static_cast<std::uint32_t>(b.dtype));
    w.u32(b.rank);
  }
  w.u32(static_cast<std::uint32_t>(d.bindings.size()));
  for (const NativeKernelDesc::Binding& b : d.bindings) {
    w.str(b.var);
    w.u32(b.buffer);
    w.u32(b.dim);
  }
  w.u32(static_cast<std::uint32_t>(d.constant_input_dims.size()));
  for (const DynamicDim& c : d.constant_input_dims) {
    w.u32(c.argument);
    w.u32(c.dim);
  }
  w.u32(d.num_stages);
  w.u32(static_cast<std::uint32_t>(d.errors.size()));
  for (const ErrorSite& e : d.errors) {
    w.u32(static_cast<std::uint32_t>(e.form));
    w.u32(static_cast<std::uint32_t>(e.kind));
    w.i32(e.buffer);
    w.i32(e.dim);
    w.str(e.text);
    w.str(e.stage);
  }
}

std::optional<NativeKernelDesc> read_desc(PayloadReader& r) {
  NativeKernelDesc d;
  // A count larger than the bytes left is corrupt (each entry takes some).
  const auto count = [&r] {
    const std::uint32_t n = r.u32();
    if (n > r.remaining()) r.fail();
    return r.failed() ? 0u : n;
  };
  const auto bad = [&r]() -> std::optional<NativeKernelDesc> {
    r.fail();
    return std::nullopt;
  };
  d.name = r.str();
  d.num_inputs = r.u32();
  d.num_outputs = r.u32();
  d.buffers.resize(count());
  for (NativeKernelDesc::Buffer& b : d.buffers) {
    b.name = r.str();
    const std::uint32_t dtype = r.u32();
    if (dtype > static_cast<std::uint32_t>(DType::boolean)) return bad();
    b.dtype = static_cast<DType>(dtype);
    b.rank = r.u32();
    if (b.rank > kMaxRank) return bad();
  }
  if (r.failed() || std::size_t{d.num_inputs} + d.num_outputs > d.buffers.size()) return bad();
  const auto dim_in_range = [&d](std::uint32_t buffer, std::uint32_t dim) {
    return buffer < d.num_inputs + d.num_outputs && dim < d.buffers[buffer].rank;
  };
  d.bindings.resize(count());
  for (NativeKernelDesc::Binding& b : d.bindings) {
    b.var = r.str();
    b.buffer = r.u32();
    b.dim = r.u32();
    if (!dim_in_range(b.buffer, b.dim)) return bad();
  }
  d.constant_input_dims.resize(count());
  for (DynamicDim& c : d.constant_input_dims) {
    c.argument = r.u32();
    c.dim = r.u32();
    if (!dim_in_range(c.argument, c.dim)) return bad();
  }
  d.num_stages = r.u32();
  if (d.num_stages > r.remaining()) return bad();
  d.errors.resize(count());
  for (ErrorSite& e : d.errors) {
    const std::uint32_t form = r.u32();
    const std::uint32_t kind = r.u32();
    if (form > static_cast<std::uint32_t>(ErrorSite::Form::index) ||
        kind > static_cast<std::uint32_t>(ErrorKind::runtime_error))
      return bad();
    e.form = static_cast<ErrorSite::Form>(form);
    e.kind = static_cast<ErrorKind>(kind);
    e.buffer = r.i32();
    e.dim = r.i32();
    e.text = r.str();
    e.stage = r.str();
    // fail() indexes the kernel's buffers and their dims with these.
    if ((e.form == ErrorSite::Form::input_dim || e.form == ErrorSite::Form::output_dim) &&
        (e.buffer < 0 || e.dim < 0 ||
         !dim_in_range(static_cast<std::uint32_t>(e.buffer), static_cast<std::uint32_t>(e.dim))))
      return bad();
  }
  if (r.failed()) return std::nullopt;
  return d;
}

Ref<Kernel> make_native_kernel(NativeKernelDesc desc, NativeCode code, std::shared_ptr<const StageRunner> stages) {
  return make_ref<NativeKernel>(std::move(desc), std::move(code), std::move(stages));
}

std::vector<std::string> native_symbols(const std::string& prefix, std::uint32_t num_stages) {
  std::vector<std::string> symbols{prefix + "_prologue"};
  for (std::uint32_t s = 0; s < num_stages; ++s) symbols.push_back(fmt::format("{}_stage{}", prefix, s));
  return symbols;
}

}  // namespace nimble::runtime
