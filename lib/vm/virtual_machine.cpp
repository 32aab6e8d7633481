// The VM's dispatch loop (include/nimble/vm/virtual_machine.hpp).
//
// Registers of all active frames live in one vector; a frame is a window
// [base, base + num_registers). Calls push a Frame on the VM's own stack, so
// deep recursion never grows the C++ stack; TailCall reuses the frame.
// A register holds either a Value or a scalar (an integer or bool with its
// dtype) that the VM computes with itself: loop counters and shape arithmetic
// never allocate. A scalar becomes a 0-d tensor only when it flows into a
// kernel, an ADT or the host (and is then kept, so that happens once).
// The loop keeps its hot state (the instruction pointer and the frame's
// registers) in locals and runs the scalar and control-flow instructions
// inline; everything that allocates or calls out is a member function.
// It is instantiated twice: with the profiler off it does nothing per
// instruction but dispatch.
#include "nimble/vm/virtual_machine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "nimble/runtime/allocator.hpp"
#include "nimble/runtime/kernel.hpp"
#include "nimble/runtime/storage.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/stream.hpp"
#include "runtime/stats_counters.hpp"
#include "runtime/trace.hpp"
#include "support/check.hpp"
#include "support/out_of_memory.hpp"
#include "runtime/value_builder.hpp"
#include "runtime/value_map.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {

namespace {

// A register. `kind` says which members are in use, and every other member
// is null: so the hot paths (scalar moves, loop counters, branches) test
// `kind` alone and never run Tensor, Value or Storage copies or destructors,
// and copying or clearing a register touches only the member in use.
// Tensors and storages are held directly, without a Value node, so
// allocating and passing them to kernels costs no heap allocation beyond the
// buffer itself. The entry's tensor arguments are borrowed: the caller's
// Values outlive the call, so a register points at the caller's Tensor (in
// `i`, which scalar moves copy) instead of taking a reference to its
// storage: no reference count changes (locked instructions) and no shape
// copied in or dropped, per argument and per call.
struct Reg {
  // Ordered: kinds up to `scalar` hold no object.
  enum class Kind : std::uint8_t {
    empty,
    borrowed,      // i: the address of a Tensor of the caller's (borrowed_tensor())
    scalar,        // i, dtype
    boxed_scalar,  // i, dtype, and t: the same scalar as a 0-d tensor
    tensor,        // t
    value,         // v: a tuple, ADT or closure (a tensor value is held as `tensor`)
    storage,       // s
  };
  Kind kind = Kind::empty;
  DType dtype = DType::i64;  // scalar
  std::int64_t i = 0;        // scalar
  Tensor t;
  Value v;
  Ref<Storage> s;

  Reg() noexcept {}  // NOLINT(modernize-use-equals-default): see Tensor()
  Reg(const Reg& other) { assign(other); }
  Reg(Reg&& other) noexcept { assign(std::move(other)); }
  Reg& operator=(const Reg& other) {
    if (this != &other) assign(other);
    return *this;
  }
  Reg& operator=(Reg&& other) noexcept {
    if (this != &other) assign(std::move(other));
    return *this;
  }
  ~Reg() = default;

  [[nodiscard]] bool holds_object() const noexcept { return kind > Kind::scalar; }
  [[nodiscard]] bool holds_tensor() const noexcept {
    return kind == Kind::boxed_scalar || kind == Kind::tensor;
  }
  [[nodiscard]] bool is_scalar() const noexcept {
    return kind == Kind::scalar || kind == Kind::boxed_scalar;
  }
  [[nodiscard]] const Tensor& borrowed_tensor() const noexcept {
    return *reinterpret_cast<const Tensor*>(static_cast<std::uintptr_t>(i));
  }
  void borrow(const Tensor& tensor) noexcept {
    if (holds_object()) drop_objects();
    kind = Kind::borrowed;
    i = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&tensor));
  }

  void clear() noexcept {
    if (holds_object()) [[unlikely]]
      drop_objects();
    kind = Kind::empty;
  }

 private:
  [[gnu::noinline]] void drop_objects() noexcept {
    if (holds_tensor())
      t = Tensor();
    else if (kind == Kind::value)
      v = Value();
    else
      s.reset();
  }

  // Copies or moves `other`'s member in use and drops this one's, if different.
  template <class R>
  void assign(R&& other) {
    if (other.holds_tensor())
      t = std::forward<R>(other).t;
    else if (holds_tensor())
      t = Tensor();
    if (other.kind == Kind::value)
      v = std::forward<R>(other).v;
    else if (kind == Kind::value)
      v = Value();
    if (other.kind == Kind::storage)
      s = std::forward<R>(other).s;
    else if (kind == Kind::storage)
      s.reset();
    kind = other.kind;
    dtype = other.dtype;
    i = other.i;
    if constexpr (!std::is_lvalue_reference_v<R>) other.kind = Kind::empty;
  }
};

struct ClosureObject final : Object {
  ClosureObject(std::uint32_t f, std::vector<Reg> c) : func(f), captured(std::move(c)) {}
  std::uint32_t func;
  std::vector<Reg> captured;  // the lifted function's leading parameters
};

struct Frame {
  std::uint32_t func;
  std::uint32_t base;       // first register of the frame
  std::uint32_t return_pc;  // in the caller
  std::uint32_t dst;        // the caller's register for the result
};


[[gnu::noinline]] std::int64_t wrap_narrow(std::int64_t x, DType t) {
  switch (t) {
    case DType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
    case DType::i8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(x));
    case DType::boolean: return x != 0;
    default: break;
  }
  throw_error(ErrorKind::type_error, "a VM scalar must be an integer or bool, got {}", to_string(t));
}

// Wraps `x` to the width of integer dtype `t` (bool: 0 or 1). Loop counters
// and shape arithmetic are i64, which needs nothing.
[[gnu::always_inline]] inline std::int64_t wrap(std::int64_t x, DType t) {
  if (t == DType::i64) [[likely]]
    return x;
  return wrap_narrow(x, t);
}

Tensor scalar_tensor(std::int64_t x, DType t) {
  switch (t) {
    case DType::i64: return Tensor::scalar<std::int64_t>(x);
    case DType::i32: return Tensor::scalar<std::int32_t>(static_cast<std::int32_t>(x));
    case DType::i8: return Tensor::scalar<std::int8_t>(static_cast<std::int8_t>(x));
    case DType::boolean: return Tensor::scalar<bool>(x != 0);
    default: break;
  }
  throw_error(ErrorKind::type_error, "a VM scalar must be an integer or bool, got {}", to_string(t));
}

const char* kind_name(Reg::Kind k) {
  switch (k) {
    case Reg::Kind::empty: return "an empty register";
    case Reg::Kind::scalar:
    case Reg::Kind::boxed_scalar: return "a scalar";
    case Reg::Kind::borrowed:
    case Reg::Kind::tensor: return "a tensor";
    case Reg::Kind::value: return "a value";
    case Reg::Kind::storage: return "a storage";
  }
  return "?";
}

[[noreturn]] void wrong_kind(const Reg& r, const char* expected) {
  throw_error(ErrorKind::type_error, "the VM expected {} in a register, found {}", expected,
              kind_name(r.kind));
}

// A 0-d integer tensor read as a scalar becomes one (keeping its tensor), so
// that a loop bound passed in as a tensor is decoded once.
[[gnu::noinline]] std::int64_t read_scalar_slow(Reg& r) {
  if (r.kind != Reg::Kind::tensor && r.kind != Reg::Kind::borrowed) wrong_kind(r, "a scalar");
  const bool borrowed = r.kind == Reg::Kind::borrowed;
  const Tensor& t = borrowed ? r.borrowed_tensor() : r.t;  // still valid after r.t is assigned below
  if (t.numel() != 1)
    throw_error(ErrorKind::type_error, "expected a scalar, got a tensor of {} elements", t.numel());
  std::int64_t x;
  switch (t.dtype()) {
    case DType::i64: x = *t.data<std::int64_t>(); break;
    case DType::i32: x = *t.data<std::int32_t>(); break;
    case DType::i8: x = *t.data<std::int8_t>(); break;
    case DType::boolean: x = *t.data<bool>() ? 1 : 0; break;
    default:
      throw_error(ErrorKind::type_error, "expected an integer or bool scalar, got {}",
                  to_string(t.dtype()));
  }
  if (t.rank() == 0) {
    // A borrowed one takes its own reference first: a boxed scalar keeps
    // its tensor in `t` (a loop bound is read every step, decoded once).
    if (borrowed) r.t = r.borrowed_tensor();
    r.kind = Reg::Kind::boxed_scalar;
    r.i = x;
    r.dtype = t.dtype();
  }
  return x;
}

[[gnu::always_inline]] inline std::int64_t read_scalar(Reg& r) {
  if (r.is_scalar()) [[likely]]
    return r.i;
  return read_scalar_slow(r);
}

DType scalar_dtype(const Reg& r) {
  return r.is_scalar() ? r.dtype : r.kind == Reg::Kind::borrowed ? r.borrowed_tensor().dtype() : r.t.dtype();
}

[[gnu::always_inline]] inline void set_scalar(Reg& r, std::int64_t x, DType t) {
  r.clear();
  r.kind = Reg::Kind::scalar;
  r.i = x;
  r.dtype = t;
}

// dst = src; a scalar copies as two words when neither holds an object.
[[gnu::always_inline]] inline void copy_reg(Reg& dst, const Reg& src) {
  if (!src.holds_object() && !dst.holds_object()) [[likely]] {
    dst.kind = src.kind;
    dst.dtype = src.dtype;
    dst.i = src.i;
    return;
  }
  dst = src;
}

void set_tensor(Reg& r, Tensor&& t) {
  if (!r.holds_tensor()) r.clear();
  r.t = std::move(t);
  r.kind = Reg::Kind::tensor;
}

// dst = a copy of `t` (one reference count; no Value in between).
void copy_tensor(Reg& r, const Tensor& t) {
  if (!r.holds_tensor()) r.clear();
  r.t = t;
  r.kind = Reg::Kind::tensor;
}

void set_value(Reg& r, Value v) {
  if (const Tensor* t = v.as_tensor()) {
    set_tensor(r, Tensor(*t));
    return;
  }
  if (r.kind != Reg::Kind::value) r.clear();
  r.v = std::move(v);
  r.kind = Reg::Kind::value;
}

void set_storage(Reg& r, Ref<Storage> s) {
  if (r.kind != Reg::Kind::storage) r.clear();
  r.s = std::move(s);
  r.kind = Reg::Kind::storage;
}

const Tensor& tensor_of(Reg& r) {
  if (r.holds_tensor()) [[likely]]
    return r.t;
  if (r.kind == Reg::Kind::borrowed) return r.borrowed_tensor();
  if (r.kind != Reg::Kind::scalar) wrong_kind(r, "a tensor");
  r.t = scalar_tensor(r.i, r.dtype);
  r.kind = Reg::Kind::boxed_scalar;
  return r.t;
}

Value value_of(Reg& r) {
  if (r.kind == Reg::Kind::value) return r.v;
  if (r.holds_tensor() || r.kind == Reg::Kind::scalar || r.kind == Reg::Kind::borrowed) return tensor_of(r);
  wrong_kind(r, "a value");
}

const Value& object_of(const Reg& r) {
  if (r.kind != Reg::Kind::value) wrong_kind(r, "a tuple, ADT or closure");
  return r.v;
}

// `x` (expected on `src`) on `dst`. A tensor already on `dst` is itself: an
// entry's caller may pass tensors that live on the device already.
Tensor on_device(const Tensor& x, Device src, Device dst) {
  if (x.device() == dst) return x;
  if (x.device() != src)
    throw_error(ErrorKind::invalid_argument, "device_copy: expected a tensor on {}, got one on {}",
                nimble::to_string(src), nimble::to_string(x.device()));
  return x.to(dst);
}

// `v` with every tensor in it (through tuple and ADT fields) on `dst`, or
// nullopt where nothing moves. Integer and bool scalars stay (the VM reads
// them on the CPU: place_devices keeps them there); closures are left as
// they are. A long list or a deep tree moves without deep recursion.
std::optional<Value> moved_to(const Value& v, Device src, Device dst) {
  return detail::map_tensors(v, [src, dst](const Tensor& t) -> std::optional<Tensor> {
    const bool vm_scalar =
        t.rank() == 0 && (t.dtype() == DType::i64 || t.dtype() == DType::i32 || t.dtype() == DType::boolean);
    if (t.device() == dst || vm_scalar) return std::nullopt;
    return on_device(t, src, dst);
  });
}

Value on_device(const Value& v, Device src, Device dst) {
  std::optional<Value> moved = moved_to(v, src, dst);
  return moved ? std::move(*moved) : v;
}

// The dims of shape tensor `t` (i64[k], every dim >= 0), viewing its data.
std::span<const std::int64_t> shape_dims(const Tensor& t) {
  if (t.dtype() != DType::i64 || t.rank() != 1)
    throw_error(ErrorKind::type_error, "a shape must be i64[k], got {}[{} dims]",
                to_string(t.dtype()), t.rank());
  const std::span<const std::int64_t> dims = t.values<std::int64_t>();
  for (std::int64_t dim : dims)
    if (dim < 0) throw_error(ErrorKind::invalid_argument, "a shape has a negative dim {}", dim);
  return dims;
}

Shape shape_from(const Tensor& t) { return Shape(shape_dims(t)); }

// True when `r` holds exactly the view that AllocTensor would make.
[[gnu::always_inline]] inline bool holds_view(const Reg& r, const Ref<Storage>& storage,
                                              std::span<const std::int64_t> dims, DType dtype,
                                              std::size_t byte_offset) {
  if (r.kind != Reg::Kind::tensor || r.t.storage() != storage || r.t.dtype() != dtype ||
      r.t.byte_offset() != byte_offset || r.t.rank() != dims.size())
    return false;
  for (std::size_t k = 0; k < dims.size(); ++k)
    if (r.t.shape()[k] != dims[k]) return false;
  return true;
}

[[gnu::noinline]] void make_view(Reg& dst, const Ref<Storage>& storage,
                                 std::span<const std::int64_t> dims, DType dtype,
                                 std::size_t byte_offset) {
  // Made before `dst` changes: `storage` may be the register's own.
  set_tensor(dst, Tensor::view_of(storage, Shape(dims), dtype, byte_offset));
}

// dst = a view of `storage` (AllocTensor, AllocTensorReg). A loop allocates
// the same view into the same register on every iteration (memory planning
// gives it the same storage and offset): then the register already holds an
// equal tensor (a tensor has no identity beyond its fields), and it is kept,
// with no reference count or shape traffic.
[[gnu::always_inline]] inline void alloc_view(Reg& dst, const Ref<Storage>& storage,
                                              std::span<const std::int64_t> dims, DType dtype,
                                              std::size_t byte_offset) {
  if (!holds_view(dst, storage, dims, dtype, byte_offset))
    make_view(dst, storage, dims, dtype, byte_offset);
}

[[gnu::always_inline]] inline std::int64_t scalar_binary(ScalarOp op, std::int64_t x, std::int64_t y, DType t) {
  switch (op) {
    case ScalarOp::add: return wrap(static_cast<std::int64_t>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y)), t);
    case ScalarOp::sub: return wrap(static_cast<std::int64_t>(static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y)), t);
    case ScalarOp::mul: return wrap(static_cast<std::int64_t>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y)), t);
    case ScalarOp::div:
    case ScalarOp::rem: {
      if (y == 0) throw_error(ErrorKind::runtime_error, "integer division by zero");
      const std::int64_t lowest = t == DType::i64 ? std::numeric_limits<std::int64_t>::min()
                                                  : wrap(std::int64_t{1} << (dtype_size(t) * 8 - 1), t);
      if (x == lowest && y == -1)
        throw_error(ErrorKind::runtime_error, "integer overflow: {} / -1", x);
      return op == ScalarOp::div ? x / y : x % y;
    }
    case ScalarOp::minimum: return std::min(x, y);
    case ScalarOp::maximum: return std::max(x, y);
    case ScalarOp::eq: return x == y;
    case ScalarOp::ne: return x != y;
    case ScalarOp::lt: return x < y;
    case ScalarOp::le: return x <= y;
    case ScalarOp::gt: return x > y;
    case ScalarOp::ge: return x >= y;
    case ScalarOp::logical_and: return (x != 0) && (y != 0);
    case ScalarOp::logical_or: return (x != 0) || (y != 0);
    default: break;
  }
  throw_error(ErrorKind::runtime_error, "bad scalar operation {}", static_cast<int>(op));
}

bool fits_tensor_without_symbols(const TypeDesc& type, const Value& v) {
  const Tensor* tensor = type.kind == TypeDesc::Kind::tensor ? v.as_tensor() : nullptr;
  if (tensor == nullptr) return false;
  const Tensor& t = *tensor;
  if (t.dtype() != type.dtype || t.rank() != type.dims.size()) return false;
  for (std::size_t k = 0; k < type.dims.size(); ++k) {
    const DimDesc& dim = type.dims[k];
    if (dim.kind == DimDesc::Kind::symbol) return false;
    if (dim.kind == DimDesc::Kind::fixed && dim.value != t.shape()[k]) return false;
  }
  return true;
}

bool yields_bool(ScalarOp op) {
  return (op >= ScalarOp::eq && op <= ScalarOp::logical_or) || op == ScalarOp::logical_not;
}

}  // namespace

struct VirtualMachine::Impl {
  explicit Impl(Executable e) : exe(std::move(e)), d(&exe.data()) {
    site_kernels.resize(d->code.size());
    primitive_calls.resize(d->primitives.size());
    primitive_ns.resize(d->primitives.size());
  }

  void make_streams() {
    streams_made = true;
    std::vector<Device> gpus;
    for (const PrimitiveInfo& p : d->primitives)
      if (!p.device.is_cpu() && std::find(gpus.begin(), gpus.end(), p.device) == gpus.end()) gpus.push_back(p.device);
    for (const Device gpu : gpus) {
      Allocator* gpu_memory = nullptr;
      try {
        gpu_memory = &allocator_for(gpu);
      } catch (const Error&) {
        // No driver or no such device: the first kernel or copy there says so.
        continue;
      }
      // A GPU of the CUDA runtime (a test's host-memory device has none).
      if (const auto* cuda_memory = dynamic_cast<const cuda::DeviceAllocator*>(gpu_memory)) {
        streams.push_back(std::make_unique<cuda::Stream>(cuda_memory->shared_context()));
        stream_list.push_back(streams.back().get());
      }
    }
  }

  Executable exe;
  const ExecutableData* d;
  // A stream a GPU the executable's kernels run on (made by the first
  // invoke), which its kernels and copies use while it runs
  // (cuda::StreamScope): this VM's GPU work in its order, on streams no
  // other VM waits on.
  std::vector<std::unique_ptr<cuda::Stream>> streams;
  std::vector<cuda::Stream*> stream_list;
  bool streams_made = false;
  std::vector<Ref<Kernel>> site_kernels;  // per InvokePacked instruction: the kernel it used
  std::string kernel_provider;            // empty: the first provider that serves a primitive
  std::vector<Reg> regs;
  std::vector<Frame> frames;
  std::size_t max_frames = VirtualMachine::kDefaultMaxCallDepth;
  std::uint32_t base = 0;        // the current frame: its first register
  std::uint32_t frame_size = 0;  // and its register count
  std::vector<Reg> call_args;  // scratch: arguments of a call being made
  // Scratch for a kernel call's arguments: the addresses of its inputs' and
  // outputs' tensors in their registers (so passing a tensor costs no
  // reference count), and its inputs as Values when one is a tuple or ADT.
  // Emptied after each call (so they live no longer than the call; invoke()
  // empties them when a call throws), with the capacity kept.
  std::vector<const Tensor*> kernel_args;
  std::vector<Value> kernel_values;

  bool profiling = false;
  bool tracing_memory = false;  // runs the profiling loop, measuring before each instruction
  MemoryTrace memory;
  std::vector<const Storage*> not_activations;  // sorted: the constants' and arguments' storages
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> trace_ranges;  // scratch
  std::unordered_set<const void*> trace_seen;                              // scratch: nodes walked
  std::vector<const Storage*> trace_storages;                            // scratch
  ArgumentCheckCache argument_cache;  // kept between calls: a warm call allocates nothing
  // Constants copied to a device (LoadConst with a device), by constant
  // index << 32 | device code: uploaded once per VM.
  std::unordered_map<std::uint64_t, Tensor> device_constants;
  std::array<std::uint64_t, kNumOpcodes> opcode_counts{};
  std::vector<std::uint64_t> primitive_calls;
  std::vector<std::uint64_t> primitive_ns;
  std::uint64_t total_ns = 0;
  std::uint64_t launches = 0;  // kernel calls of this invoke, added to EngineStats once at its end
  std::uint64_t site_hits = 0;  // of those, with the call site's kernel at hand

  // Makes room for registers [0, n); returns the (possibly moved) register file.
  Reg* reserve_registers(std::size_t n) {
    if (regs.size() < n) regs.resize(std::max(n, regs.size() * 2));
    return regs.data();
  }

  void clear_frame() {
    Reg* r = regs.data() + base;
    for (std::uint32_t k = 0; k < frame_size; ++k) r[k].clear();
  }

  // Makes function `func`, with `call_args` as its first registers, the
  // current frame at register `at`; returns the index of its first instruction.
  std::uint32_t enter(std::uint32_t func, std::uint32_t at) {
    const VMFunction& f = d->functions[func];
    Reg* r = reserve_registers(std::size_t{at} + f.num_registers) + at;
    for (std::size_t k = 0; k < call_args.size(); ++k) r[k] = std::move(call_args[k]);
    call_args.clear();
    base = at;
    frame_size = f.num_registers;
    return f.code_begin;
  }

  void push_frame(Frame frame) {
    if (frames.size() >= max_frames) [[unlikely]]
      throw_error(ErrorKind::resource_exhausted,
                  "call depth exceeds the limit of {} frames (VirtualMachine::set_max_call_depth; "
                  "unbounded recursion?)",
                  max_frames);
    frames.push_back(frame);
  }

  void collect_args(const Reg* r, std::uint32_t offset, std::uint32_t count) {
    const std::uint32_t* list = d->arg_pool.data() + offset;
    for (std::uint32_t k = 0; k < count; ++k) call_args.push_back(r[list[k]]);
  }

  void clear_kernel_args() noexcept {
    kernel_args.clear();
    kernel_values.clear();
  }

  template <bool kProfile>
  Value run(std::uint32_t entry, std::span<const Value> args);

  void exclude_from_trace(std::span<const Value> args);
  void measure_memory();

  // The handlers that do more than move a few words live out of line, so
  // that the dispatch loop stays small enough for its hot state (ip, r) to
  // stay in machine registers. Those that change frames return the index of
  // the next instruction.
  std::uint32_t call(const Instruction& in, std::uint32_t pc);
  std::uint32_t tail_call(const Instruction& in);
  std::uint32_t ret(const Instruction& in);
  Value finish(const Instruction& in);
  void invoke_packed(const Instruction& in, Reg* r, std::uint32_t pc, bool timed);
  void trace_kernel(const PrimitiveInfo& prim, const Kernel& kernel, Kernel::TensorRefs args,
                    std::uint32_t num_inputs, std::chrono::steady_clock::time_point start) const noexcept;
  void trace_kernel_event(const PrimitiveInfo& prim, const Kernel& kernel, Kernel::TensorRefs args,
                          std::uint32_t num_inputs, std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point end) const;
  void execute(const Instruction& in, Reg* r);
};

// Labels as values are a GNU extension (GCC and clang).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
template <bool kProfile>
Value VirtualMachine::Impl::run(std::uint32_t entry, std::span<const Value> args) {
  frames.clear();
  push_frame({entry, 0, 0, 0});
  const Instruction* const code = d->code.data();
  const Instruction* ip = code + enter(entry, 0);
  Reg* r = regs.data();
  // The arguments go straight into the entry frame's first registers.
  for (std::size_t k = 0; k < args.size(); ++k) {
    if (const Tensor* t = args[k].as_tensor())
      r[k].borrow(*t);
    else
      set_value(r[k], args[k]);
  }
  const auto pc_of = [code](const Instruction* at) {
    return static_cast<std::uint32_t>(at - code);
  };

  // Threaded dispatch: each handler ends in its own indirect jump to the next
  // handler (GCC's labels as values), which the branch predictor learns per
  // opcode pair; a central switch jump mispredicts on almost every change.
  // The table is static: a local one is stored anew on every call (a store
  // per opcode), and a static one is addressed relative to the code, not
  // through the GOT.
  static const void* const handlers[] = {
#define NIMBLE_OPCODE(name, dst, a, b, c, d, aux) &&op_##name,
#include "vm/opcodes.def"
#undef NIMBLE_OPCODE
  };
  // Jumps to the handler of *ip; the profiler's one hook.
#define NIMBLE_DISPATCH()                                                          \
  do {                                                                             \
    if constexpr (kProfile) {                                                      \
      ++opcode_counts[static_cast<std::size_t>(ip->opcode)];                       \
      if (tracing_memory) measure_memory();                                        \
    }                                                                              \
    goto* handlers[static_cast<std::size_t>(ip->opcode)];                          \
  } while (false)
#define NIMBLE_NEXT()  \
  do {                 \
    ++ip;              \
    NIMBLE_DISPATCH(); \
  } while (false)
#define NIMBLE_CASE(name) op_##name:
  NIMBLE_DISPATCH();
  NIMBLE_CASE(Move)
    copy_reg(r[ip->dst], r[ip->a]);
    NIMBLE_NEXT();
  NIMBLE_CASE(Ret)
    if (frames.size() == 1) return finish(*ip);
    ip = code + ret(*ip);
    r = regs.data() + base;
    NIMBLE_DISPATCH();
  NIMBLE_CASE(Invoke)
  NIMBLE_CASE(InvokeClosure)
    ip = code + call(*ip, pc_of(ip));
    r = regs.data() + base;
    NIMBLE_DISPATCH();
  NIMBLE_CASE(TailCall)
    ip = code + tail_call(*ip);
    r = regs.data() + base;
    NIMBLE_DISPATCH();
  NIMBLE_CASE(InvokePacked)
    invoke_packed(*ip, r, pc_of(ip), kProfile);
    NIMBLE_NEXT();
  NIMBLE_CASE(AllocTensor) {
    const std::int64_t* shape = d->shape_pool.data() + ip->c;
    const std::span<const std::int64_t> dims(shape + 1, static_cast<std::size_t>(shape[0]));
    const Reg& storage = r[ip->a];
    if (storage.kind != Reg::Kind::storage) wrong_kind(storage, "a storage");
    alloc_view(r[ip->dst], storage.s, dims, static_cast<DType>(ip->aux), ip->b);
    NIMBLE_NEXT();
  }
  NIMBLE_CASE(If)
    ip += jump_offset(read_scalar(r[ip->a]) != 0 ? ip->b : ip->c);
    NIMBLE_DISPATCH();
  NIMBLE_CASE(Goto)
    ip += jump_offset(ip->a);
    NIMBLE_DISPATCH();
  NIMBLE_CASE(LoadConsti) {
    const auto bits =
        static_cast<std::int64_t>(std::uint64_t{ip->a} | (std::uint64_t{ip->b} << 32));
    set_scalar(r[ip->dst], bits, static_cast<DType>(ip->aux));
    NIMBLE_NEXT();
  }
  NIMBLE_CASE(KillRegister)
    r[ip->dst].clear();
    NIMBLE_NEXT();
  NIMBLE_CASE(ScalarBinary) {
    const auto op = static_cast<ScalarOp>(ip->aux);
    const DType t = scalar_dtype(r[ip->a]);
    const std::int64_t x = scalar_binary(op, read_scalar(r[ip->a]), read_scalar(r[ip->b]), t);
    set_scalar(r[ip->dst], x, yields_bool(op) ? DType::boolean : t);
    NIMBLE_NEXT();
  }
  NIMBLE_CASE(ScalarUnary) {
    const auto op = static_cast<ScalarOp>(ip->aux);
    const DType t = scalar_dtype(r[ip->a]);
    const std::int64_t x = read_scalar(r[ip->a]);
    const std::int64_t y = op == ScalarOp::logical_not ? (x == 0)
                           : op == ScalarOp::neg       ? wrap(static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(x)), t)
                                                       : wrap(x < 0 ? static_cast<std::int64_t>(0 - static_cast<std::uint64_t>(x)) : x, t);
    set_scalar(r[ip->dst], y, op == ScalarOp::logical_not ? DType::boolean : t);
    NIMBLE_NEXT();
  }
  NIMBLE_CASE(TensorDim) {
    const Tensor& t = tensor_of(r[ip->a]);
    if (ip->b >= t.rank())
      throw_error(ErrorKind::out_of_range, "dim {} of a rank-{} tensor", ip->b, t.rank());
    set_scalar(r[ip->dst], t.shape()[ip->b], DType::i64);
    NIMBLE_NEXT();
  }
  NIMBLE_CASE(AllocStorage)
  NIMBLE_CASE(AllocFreshTensor)
  NIMBLE_CASE(TakeRow)
  NIMBLE_CASE(AllocTensorReg)
  NIMBLE_CASE(AllocADT)
  NIMBLE_CASE(AllocClosure)
  NIMBLE_CASE(GetField)
  NIMBLE_CASE(GetTag)
  NIMBLE_CASE(LoadConst)
  NIMBLE_CASE(ShapeOf)
  NIMBLE_CASE(ReshapeTensor)
  NIMBLE_CASE(DeviceCopy)
  NIMBLE_CASE(StorageSize)
  NIMBLE_CASE(MakeShape)
  NIMBLE_CASE(Fatal)
    execute(*ip, r);
    NIMBLE_NEXT();
}
#pragma GCC diagnostic pop
#undef NIMBLE_NEXT
#undef NIMBLE_DISPATCH
#undef NIMBLE_CASE

namespace {

// Nodes already walked (tuples and ADTs by their fields, closures by their
// object): a list that many registers and frames share is walked once.
using Seen = std::unordered_set<const void*>;

// The tensors registers and values refer to, through tuples, ADTs and
// closures, with work lists: a list of a million cells is walked without
// deep recursion.
template <class F>
void for_each_tensor(const Reg* reg, const Value* value, F&& f, Seen& seen) {
  // The thread's work lists, kept between calls: memory tracing walks every
  // register after every instruction.
  thread_local std::vector<const Reg*> regs;
  thread_local std::vector<const Value*> values;
  regs.clear();
  values.clear();
  if (reg != nullptr) regs.push_back(reg);
  if (value != nullptr) values.push_back(value);
  while (!regs.empty() || !values.empty()) {
    if (!regs.empty()) {
      const Reg& r = *regs.back();
      regs.pop_back();
      if (r.holds_tensor()) f(r.t);
      if (r.kind == Reg::Kind::value) values.push_back(&r.v);
      continue;
    }
    const Value& v = *values.back();
    values.pop_back();
    if (!v.defined()) continue;
    switch (v.kind()) {
      case Value::Kind::tensor: f(v.tensor()); break;
      case Value::Kind::tuple:
      case Value::Kind::adt: {
        const std::span<const Value> fields = v.fields();
        if (fields.empty() || !seen.insert(fields.data()).second) break;
        for (const Value& field : fields) values.push_back(&field);
        break;
      }
      case Value::Kind::object:
        if (const auto* closure = dynamic_cast<const ClosureObject*>(v.object().get());
            closure != nullptr && seen.insert(closure).second)
          for (const Reg& captured : closure->captured) regs.push_back(&captured);
        break;
    }
  }
}

template <class F>
void for_each_tensor(const Reg& reg, F&& f, Seen& seen) {
  for_each_tensor(&reg, nullptr, f, seen);
}

template <class F>
void for_each_tensor(const Value& v, F&& f, Seen& seen) {
  for_each_tensor(nullptr, &v, f, seen);
}

}  // namespace

void VirtualMachine::Impl::exclude_from_trace(std::span<const Value> args) {
  not_activations.clear();
  for (const Tensor& c : d->constants) not_activations.push_back(c.storage().get());
  Seen seen;
  for (const Value& a : args)
    for_each_tensor(a, [&](const Tensor& t) { not_activations.push_back(t.storage().get()); }, seen);
  std::sort(not_activations.begin(), not_activations.end());
}

void VirtualMachine::Impl::measure_memory() {
  trace_storages.clear();
  trace_ranges.clear();
  const auto add = [&](const Tensor& t) {
    const Storage* s = t.storage().get();
    if (s == nullptr || std::binary_search(not_activations.begin(), not_activations.end(), s)) return;
    trace_storages.push_back(s);
    const auto begin = reinterpret_cast<std::uintptr_t>(s->data()) + t.byte_offset();
    trace_ranges.emplace_back(begin, begin + t.nbytes());
  };
  const Reg* all = regs.data();
  trace_seen.clear();
  for (std::size_t k = 0, n = std::size_t{base} + frame_size; k < n; ++k) {
    for_each_tensor(all[k], add, trace_seen);
    if (all[k].kind == Reg::Kind::storage) trace_storages.push_back(all[k].s.get());
  }
  std::sort(trace_storages.begin(), trace_storages.end());
  trace_storages.erase(std::unique(trace_storages.begin(), trace_storages.end()), trace_storages.end());
  std::uint64_t held = 0;
  for (const Storage* s : trace_storages) held += s->nbytes();
  std::sort(trace_ranges.begin(), trace_ranges.end());
  std::uint64_t live = 0;
  std::uintptr_t covered = 0;  // the union of the ranges so far ends here
  for (const auto& [begin, end] : trace_ranges) {
    const std::uintptr_t from = std::max(begin, covered);
    if (end > from) live += end - from;
    covered = std::max(covered, end);
  }
  memory.activation_peak_bytes = std::max(memory.activation_peak_bytes, held);
  memory.activation_lower_bound_bytes = std::max(memory.activation_lower_bound_bytes, live);
}

std::uint32_t VirtualMachine::Impl::call(const Instruction& in, std::uint32_t pc) {
  const Reg* r = regs.data() + base;
  std::uint32_t func = in.a;
  if (in.opcode == Opcode::InvokeClosure) {
    const auto* closure = static_cast<const ClosureObject*>(object_of(r[in.a]).object().get());
    func = closure->func;
    call_args.insert(call_args.end(), closure->captured.begin(), closure->captured.end());
  }
  collect_args(r, in.b, in.c);
  push_frame({func, base + frame_size, pc + 1, in.dst});
  return enter(func, base + frame_size);
}

std::uint32_t VirtualMachine::Impl::tail_call(const Instruction& in) {
  collect_args(regs.data() + base, in.b, in.c);
  clear_frame();
  frames.back().func = in.a;
  return enter(in.a, base);
}

std::uint32_t VirtualMachine::Impl::ret(const Instruction& in) {
  Reg result = std::move(regs[base + in.a]);
  clear_frame();
  const Frame done = frames.back();
  frames.pop_back();
  const Frame& caller = frames.back();
  base = caller.base;
  frame_size = d->functions[caller.func].num_registers;
  regs[base + done.dst] = std::move(result);
  return done.return_pc;
}

// Ret from the entry function.
Value VirtualMachine::Impl::finish(const Instruction& in) {
  // Taken straight from its register, which clear_frame then finds empty.
  Reg& out = regs[base + in.a];
  Value result = out.kind == Reg::Kind::tensor ? Value(std::move(out.t)) : value_of(out);
  clear_frame();
  frames.pop_back();
  return result;
}

void VirtualMachine::Impl::execute(const Instruction& in, Reg* r) {
  switch (in.opcode) {
    case Opcode::AllocStorage: {
      const std::int64_t size = read_scalar(r[in.a]);
      if (size < 0) throw_error(ErrorKind::invalid_argument, "alloc_storage of {} bytes", size);
      const std::optional<Device> device = decode_device(in.c);
      set_storage(r[in.dst], Storage::allocate(static_cast<std::size_t>(size), *device));
      return;
    }
    case Opcode::AllocFreshTensor: {
      // A tensor in a storage of its own, which no register holds.
      const std::int64_t* shape = d->shape_pool.data() + in.a;
      const std::span<const std::int64_t> dims(shape + 1, static_cast<std::size_t>(shape[0]));
      const auto dtype = static_cast<DType>(in.aux);
      std::int64_t bytes = static_cast<std::int64_t>(dtype_size(dtype));
      for (std::int64_t dim : dims)  // each >= 0 (the verifier)
        if (__builtin_mul_overflow(bytes, dim, &bytes))
          throw_error(ErrorKind::invalid_argument, "a tensor of shape {} is too large", to_string(Shape(dims)));
      set_tensor(r[in.dst], Tensor::view_of(Storage::allocate(static_cast<std::size_t>(bytes), *decode_device(in.b)),
                                            Shape(dims), dtype));
      return;
    }
    case Opcode::TakeRow: {
      // take(data, i) along axis 0 with a scalar i: row i, a view (a tensor
      // is row-major and dense: its rows lie one after another).
      const std::int64_t i = read_scalar(r[in.b]);
      const Tensor& data = tensor_of(r[in.a]);
      if (data.rank() == 0) throw_error(ErrorKind::invalid_argument, "data must have rank >= 1, got []");
      const std::int64_t rows = data.shape()[0];
      if (i < 0 || i >= rows)
        throw_error(ErrorKind::runtime_error, "indices = {} is out of range for axis 0 of data {} (extent {})", i,
                    to_string(data.shape()), rows);
      const Shape row(data.shape().dims().subspan(1));
      const std::size_t offset = data.byte_offset() + static_cast<std::size_t>(i * row.numel()) * dtype_size(data.dtype());
      Tensor view = Tensor::view_of(data.storage(), row, data.dtype(), offset);
      set_tensor(r[in.dst], std::move(view));
      return;
    }
    case Opcode::AllocTensorReg: {
      const Reg& storage = r[in.a];
      if (storage.kind != Reg::Kind::storage) wrong_kind(storage, "a storage");
      alloc_view(r[in.dst], storage.s, shape_dims(tensor_of(r[in.c])), static_cast<DType>(in.aux),
                 in.b);
      return;
    }
    case Opcode::AllocADT: {
      struct Fields {
        Reg* r;
        const std::uint32_t* list;
      } fields{r, d->arg_pool.data() + in.b};
      set_value(r[in.dst], detail::make_aggregate(
                               in.a == kTupleTag, in.a, in.c,
                               [](void* context, std::size_t k) {
                                 auto* f = static_cast<Fields*>(context);
                                 return value_of(f->r[f->list[k]]);
                               },
                               &fields));
      return;
    }
    case Opcode::AllocClosure: {
      std::vector<Reg> captured;
      captured.reserve(in.c);
      const std::uint32_t* list = d->arg_pool.data() + in.b;
      for (std::uint32_t k = 0; k < in.c; ++k) captured.push_back(r[list[k]]);
      set_value(r[in.dst], Value::object(make_ref<ClosureObject>(in.a, std::move(captured))));
      return;
    }
    case Opcode::GetField: {
      Value field = object_of(r[in.a])[in.b];
      set_value(r[in.dst], std::move(field));
      return;
    }
    case Opcode::GetTag:
      set_scalar(r[in.dst], object_of(r[in.a]).tag(), DType::i64);
      return;
    case Opcode::LoadConst: {
      const Device device = *decode_device(in.b);
      if (device.is_cpu()) {
        copy_tensor(r[in.dst], d->constants[in.a]);
        return;
      }
      // A constant a kernel on a device reads: copied there on first use,
      // kept for this VM's later calls.
      const std::uint64_t key = (std::uint64_t{in.a} << 32) | in.b;
      auto it = device_constants.find(key);
      if (it == device_constants.end()) it = device_constants.emplace(key, d->constants[in.a].to(device)).first;
      copy_tensor(r[in.dst], it->second);
      return;
    }
    case Opcode::ShapeOf: {
      const Tensor& t = tensor_of(r[in.a]);
      Tensor shape = Tensor::empty({static_cast<std::int64_t>(t.rank())}, DType::i64);
      std::copy(t.shape().begin(), t.shape().end(), shape.data<std::int64_t>());
      set_tensor(r[in.dst], std::move(shape));
      return;
    }
    case Opcode::ReshapeTensor: {
      Tensor t = tensor_of(r[in.a]).reshape(shape_from(tensor_of(r[in.b])));
      set_tensor(r[in.dst], std::move(t));
      return;
    }
    case Opcode::DeviceCopy: {
      const Device src = *decode_device(in.b);
      const Device dst = *decode_device(in.c);
      if (src == dst) {
        r[in.dst] = r[in.a];
        return;
      }
      if (r[in.a].kind == Reg::Kind::value) {  // a tuple or ADT: every tensor in it
        set_value(r[in.dst], on_device(r[in.a].v, src, dst));
        return;
      }
      set_tensor(r[in.dst], on_device(tensor_of(r[in.a]), src, dst));
      return;
    }
    case Opcode::StorageSize: {
      const Shape shape = shape_from(tensor_of(r[in.a]));
      std::int64_t bytes = static_cast<std::int64_t>(dtype_size(static_cast<DType>(in.aux)));
      for (std::int64_t e : shape)
        if (__builtin_mul_overflow(bytes, e, &bytes))
          throw_error(ErrorKind::invalid_argument, "a tensor of shape {} is too large",
                      to_string(shape));
      set_scalar(r[in.dst], bytes, DType::i64);
      return;
    }
    case Opcode::MakeShape: {
      Tensor shape = Tensor::empty({static_cast<std::int64_t>(in.b)}, DType::i64);
      const std::uint32_t* list = d->arg_pool.data() + in.a;
      for (std::uint32_t k = 0; k < in.b; ++k) shape.data<std::int64_t>()[k] = read_scalar(r[list[k]]);
      set_tensor(r[in.dst], std::move(shape));
      return;
    }
    case Opcode::Fatal:
      throw_error(ErrorKind::runtime_error, "{}", d->strings[in.a]);
    default:
      NIMBLE_ASSERT(false, "the dispatch loop runs this opcode itself");
  }
}

void VirtualMachine::Impl::invoke_packed(const Instruction& in, Reg* r, std::uint32_t pc,
                                         bool timed) {
  const PrimitiveInfo& prim = d->primitives[in.a];
  Ref<Kernel>& kernel = site_kernels[pc];
  if (!kernel) [[unlikely]]
    kernel = KernelCache::global().get(prim, kernel_provider);
  else
    ++site_hits;
  ++launches;
  const std::uint32_t* list = d->arg_pool.data() + in.b;
  const std::uint32_t num_inputs = in.c - in.d;
  // Inputs are tensors (or scalars, passed as 0-d tensors) unless one is a
  // tuple or ADT (concatenate's tuple): then every input goes as a Value.
  bool values = false;
  for (std::uint32_t k = 0; k < num_inputs; ++k) {
    Reg& input = r[list[k]];
    if (input.kind == Reg::Kind::value) [[unlikely]] {
      values = true;
      break;
    }
    kernel_args.push_back(&tensor_of(input));
  }
  if (values) {
    kernel_args.clear();
    for (std::uint32_t k = 0; k < num_inputs; ++k) kernel_values.push_back(value_of(r[list[k]]));
  }
  for (std::uint32_t k = num_inputs; k < in.c; ++k) kernel_args.push_back(&tensor_of(r[list[k]]));
  const Kernel::TensorRefs args(kernel_args);
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    if (values)
      kernel->run_values(kernel_values, args);
    else
      kernel->run(args.first(num_inputs), args.subspan(num_inputs));
  } catch (Error& e) {
    throw e.with_context(prim.name);
  }
  if (timed && trace::recording()) trace_kernel(prim, *kernel, args, values ? 0 : num_inputs, start);
  clear_kernel_args();
  if (timed) {
    primitive_calls[in.a] += 1;
    primitive_ns[in.a] += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
  }
}

// The kernel call as a trace event: its tensors' shapes and, for a kernel
// with dynamic dims, their values and the shape bucket they fall in.
void VirtualMachine::Impl::trace_kernel(const PrimitiveInfo& prim, const Kernel& kernel,
                                        Kernel::TensorRefs args, std::uint32_t num_inputs,
                                        std::chrono::steady_clock::time_point start) const noexcept {
  const auto end = std::chrono::steady_clock::now();
  try {  // out of memory, the trace loses the event, not the call
    trace_kernel_event(prim, kernel, args, num_inputs, start, end);
  } catch (...) {
  }
}

void VirtualMachine::Impl::trace_kernel_event(const PrimitiveInfo& prim, const Kernel& kernel,
                                              Kernel::TensorRefs args, std::uint32_t num_inputs,
                                              std::chrono::steady_clock::time_point start,
                                              std::chrono::steady_clock::time_point end) const {
  std::string shapes;
  for (std::size_t k = 0; k < args.size(); ++k)
    shapes += fmt::format("{}{}{}", k == 0 ? "" : k == num_inputs ? " -> " : ", ", to_string(args[k]->dtype()),
                          to_string(args[k]->shape()));
  std::vector<std::int64_t> dims;
  for (const DynamicDim& dd : kernel.dynamic_dims())
    if (dd.argument < num_inputs && dd.dim < args[dd.argument]->rank())
      dims.push_back(args[dd.argument]->shape()[dd.dim]);
  std::string more;
  if (!dims.empty())
    more = fmt::format(R"(, "dynamic dims": {}, "bucket": {})",
                       trace::quoted(fmt::format("{}", fmt::join(dims, ", "))),
                       trace::quoted(KernelCache::global().options().buckets.bucket_of(dims).to_string()));
  trace::complete(prim.name, "kernel", start, end,
                  fmt::format(R"("tensors": {}{})", trace::quoted(shapes), more));
}

VirtualMachine::VirtualMachine(Executable executable)
    : impl_(std::make_unique<Impl>(std::move(executable))) {}
VirtualMachine::~VirtualMachine() = default;
VirtualMachine::VirtualMachine(VirtualMachine&&) noexcept = default;
VirtualMachine& VirtualMachine::operator=(VirtualMachine&&) noexcept = default;

const Executable& VirtualMachine::executable() const noexcept { return impl_->exe; }

Value VirtualMachine::invoke(std::string_view function, std::span<const Value> args) {
  return with_memory_errors("invoke", [&] { return invoke_checked(function, args); });
}

Value VirtualMachine::invoke_checked(std::string_view function, std::span<const Value> args) {
  const ExecutableData& d = *impl_->d;
  const std::int64_t index = impl_->exe.find_function(function);
  if (index < 0)
    throw_error(ErrorKind::invalid_argument, "invoke: the executable has no function @{}", function);
  const VMFunction& f = d.functions[static_cast<std::size_t>(index)];
  if (!f.is_entry)
    throw_error(ErrorKind::invalid_argument, "invoke: @{} is not an entry point", function);
  if (args.size() != f.param_types.size())
    throw_error(ErrorKind::type_error, "@{}: expected {} arguments, got {}", function,
                f.param_types.size(), args.size());
  // A tensor whose type has no symbolic dim is checked here; the rest
  // (symbols, tuples, ADTs) and every mismatch go to the ArgumentChecker,
  // which relates symbols across arguments and words the error.
  std::optional<ArgumentChecker> checker;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (fits_tensor_without_symbols(f.param_types[i], args[i])) continue;
    if (!checker) checker.emplace(d.adts, function, impl_->argument_cache);
    checker->check(i, f.param_names[i], f.param_types[i], args[i]);
  }

  if (!impl_->streams_made) impl_->make_streams();
  const cuda::StreamScope streams(impl_->stream_list);
  const bool traced = trace::recording();
  const auto start = impl_->profiling || traced ? std::chrono::steady_clock::now()
                                                : std::chrono::steady_clock::time_point{};
  if (impl_->tracing_memory) impl_->exclude_from_trace(args);
  try {
    Value result = impl_->profiling || impl_->tracing_memory || traced
                       ? impl_->run<true>(static_cast<std::uint32_t>(index), args)
                       : impl_->run<false>(static_cast<std::uint32_t>(index), args);
    stats::count_kernel_launches(std::exchange(impl_->launches, 0), std::exchange(impl_->site_hits, 0));
    if (traced) {
      try {  // out of memory, the trace loses the event, not the result
        trace::complete(fmt::format("invoke @{}", function), "vm", start, std::chrono::steady_clock::now());
      } catch (...) {
      }
    }
    if (impl_->profiling)
      impl_->total_ns += static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
              .count());
    return result;
  } catch (...) {
    stats::count_kernel_launches(std::exchange(impl_->launches, 0), std::exchange(impl_->site_hits, 0));
    // Leave the VM ready for the next call: drop every frame and register.
    impl_->frames.clear();
    impl_->call_args.clear();
    impl_->clear_kernel_args();
    for (Reg& reg : impl_->regs) reg.clear();
    throw;
  }
}

void VirtualMachine::set_kernel_provider(std::string provider) {
  impl_->kernel_provider = std::move(provider);
  std::fill(impl_->site_kernels.begin(), impl_->site_kernels.end(), Ref<Kernel>{});
}

void VirtualMachine::set_max_call_depth(std::size_t frames) {
  if (frames == 0)
    throw_error(ErrorKind::invalid_argument, "set_max_call_depth: the limit must be >= 1, got 0");
  impl_->max_frames = frames;
}

void VirtualMachine::set_profiling(bool on) {
  impl_->profiling = on;
  impl_->opcode_counts.fill(0);
  std::fill(impl_->primitive_calls.begin(), impl_->primitive_calls.end(), 0);
  std::fill(impl_->primitive_ns.begin(), impl_->primitive_ns.end(), 0);
  impl_->total_ns = 0;
}

void VirtualMachine::set_memory_tracing(bool on) {
  impl_->tracing_memory = on;
  impl_->memory = {};
}

MemoryTrace VirtualMachine::memory_trace() const { return impl_->memory; }

Profile VirtualMachine::profile() const {
  Profile p;
  const ExecutableData& d = *impl_->d;
  for (std::size_t k = 0; k < d.primitives.size(); ++k)
    if (impl_->primitive_calls[k])
      p.primitives.push_back({d.primitives[k].name, impl_->primitive_calls[k], impl_->primitive_ns[k]});
  std::sort(p.primitives.begin(), p.primitives.end(),
            [](const auto& a, const auto& b) { return a.nanoseconds > b.nanoseconds; });
  for (std::size_t k = 0; k < kNumOpcodes; ++k)
    if (impl_->opcode_counts[k])
      p.instructions.push_back({std::string(kOpcodeInfo[k].name), impl_->opcode_counts[k]});
  std::sort(p.instructions.begin(), p.instructions.end(),
            [](const auto& a, const auto& b) { return a.count > b.count; });
  p.total_nanoseconds = impl_->total_ns;
  return p;
}

std::string Profile::table() const {
  std::string out = "| primitive | calls | total ms | µs per call |\n|---|---:|---:|---:|\n";
  for (const Primitive& p : primitives)
    out += fmt::format("| {} | {} | {:.3f} | {:.2f} |\n", p.name, p.calls, p.nanoseconds / 1e6,
                       p.calls ? p.nanoseconds / 1e3 / static_cast<double>(p.calls) : 0.0);
  out += "\n| instruction | count |\n|---|---:|\n";
  for (const InstructionClass& c : instructions) out += fmt::format("| {} | {} |\n", c.name, c.count);
  out += fmt::format("\ntotal: {:.3f} ms\n", total_nanoseconds / 1e6);
  return out;
}

}  // namespace nimble::vm
