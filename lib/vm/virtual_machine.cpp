// The VM's dispatch loop (include/nimble/vm/virtual_machine.hpp).
//
// Registers of all active frames live in one vector; a frame is a window
// [base, base + num_registers). Calls push a Frame on the VM's own stack, so
// deep recursion never grows the C++ stack; TailCall reuses the frame.
// A register holds either a Value or a scalar (an integer or bool with its
// dtype) that the VM computes with itself: loop counters and shape arithmetic
// never allocate. A scalar becomes a 0-d tensor only when it flows into a
// kernel, an ADT or the host (and is then kept, so that happens once).
// The loop is instantiated twice: with the profiler off it does nothing per
// instruction but dispatch.
#include "nimble/vm/virtual_machine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <utility>

#include "nimble/runtime/kernel.hpp"
#include "nimble/runtime/storage.hpp"
#include "runtime/stats_counters.hpp"
#include "support/check.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {

namespace {

// A register: empty, a scalar the VM computes with, a tensor, a storage, or
// any other value (tuple, ADT, closure). Tensors and storages are held
// directly, without a Value node, so allocating and passing them to kernels
// costs no heap allocation beyond the buffer itself.
struct Reg {
  enum class Kind : std::uint8_t { empty, scalar, tensor, value, storage };
  Kind kind = Kind::empty;
  DType dtype = DType::i64;  // scalar
  std::int64_t i = 0;        // scalar
  Tensor t;                  // tensor; for a scalar, its 0-d tensor once materialized
  Value v;                   // value
  Ref<Storage> s;            // storage
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

constexpr std::size_t kMaxFrames = std::size_t{1} << 22;

// Wraps `x` to the width of integer dtype `t` (bool: 0 or 1).
std::int64_t wrap(std::int64_t x, DType t) {
  switch (t) {
    case DType::i64: return x;
    case DType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
    case DType::i8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(x));
    case DType::boolean: return x != 0;
    default: break;
  }
  throw_error(ErrorKind::type_error, "a VM scalar must be an integer or bool, got {}", to_string(t));
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
    case Reg::Kind::scalar: return "a scalar";
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
  if (r.kind != Reg::Kind::tensor) wrong_kind(r, "a scalar");
  const Tensor& t = r.t;
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
    r.kind = Reg::Kind::scalar;
    r.i = x;
    r.dtype = t.dtype();
  }
  return x;
}

inline std::int64_t read_scalar(Reg& r) {
  if (r.kind == Reg::Kind::scalar) [[likely]]
    return r.i;
  return read_scalar_slow(r);
}

DType scalar_dtype(const Reg& r) { return r.kind == Reg::Kind::scalar ? r.dtype : r.t.dtype(); }

[[gnu::noinline]] void drop_objects(Reg& r) {
  r.t = Tensor();
  r.v = Value();
  r.s.reset();
}

inline void set_scalar(Reg& r, std::int64_t x, DType t) {
  r.kind = Reg::Kind::scalar;
  r.i = x;
  r.dtype = t;
  // The common case (a loop counter) holds no object to drop.
  if (r.t.defined() || r.v.defined() || r.s) [[unlikely]]
    drop_objects(r);
}

void set_tensor(Reg& r, Tensor t) {
  r.kind = Reg::Kind::tensor;
  r.t = std::move(t);
  if (r.v.defined()) r.v = Value();
  if (r.s) r.s.reset();
}

// dst = src; a scalar without a materialized tensor copies as two words.
void copy_reg(Reg& dst, const Reg& src) {
  if (src.kind == Reg::Kind::scalar && !src.t.defined()) {
    set_scalar(dst, src.i, src.dtype);
    return;
  }
  dst = src;
}

void set_value(Reg& r, Value v) {
  if (v.defined() && v.is_tensor()) {
    set_tensor(r, v.tensor());
    return;
  }
  r.kind = Reg::Kind::value;
  r.v = std::move(v);
  if (r.t.defined()) r.t = Tensor();
  if (r.s) r.s.reset();
}

const Tensor& tensor_of(Reg& r) {
  switch (r.kind) {
    case Reg::Kind::tensor: return r.t;
    case Reg::Kind::scalar:
      if (!r.t.defined()) r.t = scalar_tensor(r.i, r.dtype);
      return r.t;
    default: wrong_kind(r, "a tensor");
  }
}

Value value_of(Reg& r) {
  switch (r.kind) {
    case Reg::Kind::value: return r.v;
    case Reg::Kind::tensor:
    case Reg::Kind::scalar: return tensor_of(r);
    default: wrong_kind(r, "a value");
  }
}

const Value& object_of(const Reg& r) {
  if (r.kind != Reg::Kind::value) wrong_kind(r, "a tuple, ADT or closure");
  return r.v;
}

Shape shape_from(const Tensor& t) {
  if (t.dtype() != DType::i64 || t.rank() != 1)
    throw_error(ErrorKind::type_error, "a shape must be i64[k], got {}[{} dims]",
                to_string(t.dtype()), t.rank());
  const std::int64_t* dims = t.data<std::int64_t>();
  for (std::int64_t k = 0; k < t.numel(); ++k)
    if (dims[k] < 0) throw_error(ErrorKind::invalid_argument, "a shape has a negative dim {}", dims[k]);
  return Shape(std::span<const std::int64_t>(dims, static_cast<std::size_t>(t.numel())));
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

bool yields_bool(ScalarOp op) {
  return (op >= ScalarOp::eq && op <= ScalarOp::logical_or) || op == ScalarOp::logical_not;
}

}  // namespace

struct VirtualMachine::Impl {
  explicit Impl(Executable e) : exe(std::move(e)), d(&exe.data()) {
    for (const Tensor& c : d->constants) constants.emplace_back(c);
    site_kernels.resize(d->code.size());
    primitive_calls.resize(d->primitives.size());
    primitive_ns.resize(d->primitives.size());
  }

  Executable exe;
  const ExecutableData* d;
  std::vector<Value> constants;
  std::vector<Ref<Kernel>> site_kernels;  // per InvokePacked instruction: the kernel it used
  std::string kernel_provider;            // empty: the first provider that serves a primitive
  std::vector<Reg> regs;
  std::vector<Frame> frames;
  std::vector<Reg> call_args;  // scratch: arguments of a call being made
  std::vector<Tensor> kernel_tensors;  // scratch: a kernel call's inputs
  std::vector<Value> kernel_values;
  std::vector<Tensor> kernel_outputs;

  bool profiling = false;
  std::array<std::uint64_t, kNumOpcodes> opcode_counts{};
  std::vector<std::uint64_t> primitive_calls;
  std::vector<std::uint64_t> primitive_ns;
  std::uint64_t total_ns = 0;
  std::uint64_t launches = 0;  // kernel calls of this invoke, added to EngineStats once at its end

  // Makes room for registers [0, n); returns the (possibly moved) register file.
  Reg* reserve_registers(std::size_t n) {
    if (regs.size() < n) regs.resize(std::max(n, regs.size() * 2));
    return regs.data();
  }

  void clear_frame(std::uint32_t base, std::uint32_t count) {
    Reg* r = regs.data() + base;
    for (std::uint32_t k = 0; k < count; ++k) r[k] = Reg{};
  }

  // Enters function `func` with `call_args` as its first registers.
  Reg* enter(std::uint32_t func, std::uint32_t base) {
    const VMFunction& f = d->functions[func];
    Reg* all = reserve_registers(std::size_t{base} + f.num_registers);
    Reg* r = all + base;
    for (std::size_t k = 0; k < call_args.size(); ++k) r[k] = std::move(call_args[k]);
    call_args.clear();
    return r;
  }

  void push_frame(Frame frame) {
    if (frames.size() >= kMaxFrames)
      throw_error(ErrorKind::runtime_error, "call depth exceeds {} frames (unbounded recursion?)",
                  kMaxFrames);
    frames.push_back(frame);
  }

  void collect_args(const Reg* r, std::uint32_t offset, std::uint32_t count) {
    const std::uint32_t* list = d->arg_pool.data() + offset;
    for (std::uint32_t k = 0; k < count; ++k) call_args.push_back(r[list[k]]);
  }

  template <bool kProfile>
  Value run(std::uint32_t entry, std::vector<Value>& args);

  void invoke_packed(const Instruction& in, Reg* r, std::uint32_t pc, bool timed);
};

// Labels as values are a GNU extension (GCC and clang).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
template <bool kProfile>
Value VirtualMachine::Impl::run(std::uint32_t entry, std::vector<Value>& args) {
  const Instruction* code = d->code.data();
  const std::uint32_t* pool = d->arg_pool.data();
  frames.clear();
  for (Value& a : args) {
    call_args.emplace_back();
    set_value(call_args.back(), std::move(a));
  }
  push_frame({entry, 0, 0, 0});
  Reg* r = enter(entry, 0);
  std::uint32_t base = 0;
  std::uint32_t frame_size = d->functions[entry].num_registers;
  std::uint32_t pc = d->functions[entry].code_begin;

  // Threaded dispatch: each handler ends in its own indirect jump to the next
  // handler (GCC's labels as values), which the branch predictor learns per
  // opcode pair; a central switch jump mispredicts on almost every change.
  static const void* const kHandlers[] = {
#define NIMBLE_OPCODE(name, dst, a, b, c, d, aux) &&op_##name,
#include "vm/opcodes.def"
#undef NIMBLE_OPCODE
  };
  const Instruction* ip;
#define NIMBLE_NEXT()                                                                   \
  do {                                                                                  \
    ip = code + pc;                                                                     \
    if constexpr (kProfile) ++opcode_counts[static_cast<std::size_t>(ip->opcode)];      \
    goto* kHandlers[static_cast<std::size_t>(ip->opcode)];                              \
  } while (false)
#define NIMBLE_CASE(name) op_##name:
  NIMBLE_NEXT();
  {
    {
      NIMBLE_CASE(Move)
        copy_reg(r[ip->dst], r[ip->a]);
        ++pc;
        NIMBLE_NEXT();
      NIMBLE_CASE(Ret) {
        Reg result = std::move(r[ip->a]);
        clear_frame(base, frame_size);
        const Frame done = frames.back();
        frames.pop_back();
        if (frames.empty()) return value_of(result);
        const Frame& caller = frames.back();
        base = caller.base;
        frame_size = d->functions[caller.func].num_registers;
        r = regs.data() + base;
        r[done.dst] = std::move(result);
        pc = done.return_pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(Invoke)
      NIMBLE_CASE(InvokeClosure) {
        std::uint32_t func = ip->a;
        if (ip->opcode == Opcode::InvokeClosure) {
          const auto* closure = static_cast<const ClosureObject*>(object_of(r[ip->a]).object().get());
          func = closure->func;
          call_args.insert(call_args.end(), closure->captured.begin(), closure->captured.end());
        }
        collect_args(r, ip->b, ip->c);
        const std::uint32_t callee_base = base + frame_size;
        push_frame({func, callee_base, pc + 1, ip->dst});
        r = enter(func, callee_base);
        base = callee_base;
        frame_size = d->functions[func].num_registers;
        pc = d->functions[func].code_begin;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(TailCall) {
        collect_args(r, ip->b, ip->c);
        clear_frame(base, frame_size);
        frames.back().func = ip->a;
        r = enter(ip->a, base);
        frame_size = d->functions[ip->a].num_registers;
        pc = d->functions[ip->a].code_begin;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(InvokePacked)
        invoke_packed(*ip, r, pc, kProfile);
        ++pc;
        NIMBLE_NEXT();
      NIMBLE_CASE(AllocStorage) {
        const std::int64_t size = read_scalar(r[ip->a]);
        if (size < 0) throw_error(ErrorKind::invalid_argument, "alloc_storage of {} bytes", size);
        const std::optional<Device> device = decode_device(ip->c);
        Reg& dst = r[ip->dst];
        if (dst.t.defined()) dst.t = Tensor();
        if (dst.v.defined()) dst.v = Value();
        dst.kind = Reg::Kind::storage;
        dst.s = Storage::allocate(static_cast<std::size_t>(size), *device);
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(AllocTensor)
      NIMBLE_CASE(AllocTensorReg) {
        if (r[ip->a].kind != Reg::Kind::storage) wrong_kind(r[ip->a], "a storage");
        const Ref<Storage>& storage = r[ip->a].s;
        Shape shape;
        if (ip->opcode == Opcode::AllocTensor) {
          const std::int64_t* s = d->shape_pool.data() + ip->c;
          shape = Shape(std::span<const std::int64_t>(s + 1, static_cast<std::size_t>(s[0])));
        } else {
          shape = shape_from(tensor_of(r[ip->c]));
        }
        set_tensor(r[ip->dst],
                   Tensor::view_of(storage, std::move(shape), static_cast<DType>(ip->aux), ip->b));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(AllocADT) {
        std::vector<Value> fields;
        fields.reserve(ip->c);
        for (std::uint32_t k = 0; k < ip->c; ++k) fields.push_back(value_of(r[pool[ip->b + k]]));
        set_value(r[ip->dst], ip->a == kTupleTag ? Value::tuple(std::move(fields))
                                               : Value::adt(ip->a, std::move(fields)));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(AllocClosure) {
        std::vector<Reg> captured;
        captured.reserve(ip->c);
        for (std::uint32_t k = 0; k < ip->c; ++k) captured.push_back(r[pool[ip->b + k]]);
        set_value(r[ip->dst], Value::object(make_ref<ClosureObject>(ip->a, std::move(captured))));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(GetField) {
        Value field = object_of(r[ip->a])[ip->b];
        set_value(r[ip->dst], std::move(field));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(GetTag)
        set_scalar(r[ip->dst], object_of(r[ip->a]).tag(), DType::i64);
        ++pc;
        NIMBLE_NEXT();
      NIMBLE_CASE(If)
        pc += static_cast<std::uint32_t>(jump_offset(read_scalar(r[ip->a]) != 0 ? ip->b : ip->c));
        NIMBLE_NEXT();
      NIMBLE_CASE(Goto)
        pc += static_cast<std::uint32_t>(jump_offset(ip->a));
        NIMBLE_NEXT();
      NIMBLE_CASE(LoadConst)
        set_value(r[ip->dst], constants[ip->a]);
        ++pc;
        NIMBLE_NEXT();
      NIMBLE_CASE(LoadConsti) {
        const auto bits = static_cast<std::int64_t>(std::uint64_t{ip->a} | (std::uint64_t{ip->b} << 32));
        set_scalar(r[ip->dst], bits, static_cast<DType>(ip->aux));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(ShapeOf) {
        const Tensor& t = tensor_of(r[ip->a]);
        Tensor shape = Tensor::empty({static_cast<std::int64_t>(t.rank())}, DType::i64);
        std::copy(t.shape().begin(), t.shape().end(), shape.data<std::int64_t>());
        set_tensor(r[ip->dst], std::move(shape));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(ReshapeTensor) {
        Tensor t = tensor_of(r[ip->a]).reshape(shape_from(tensor_of(r[ip->b])));
        set_tensor(r[ip->dst], std::move(t));
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(DeviceCopy) {
        if (ip->b != ip->c)
          throw_error(ErrorKind::not_supported, "not supported: a copy between devices {} and {}",
                      nimble::to_string(*decode_device(ip->b)), nimble::to_string(*decode_device(ip->c)));
        r[ip->dst] = r[ip->a];
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(KillRegister)
        r[ip->dst] = Reg{};
        ++pc;
        NIMBLE_NEXT();
      NIMBLE_CASE(Fatal)
        throw_error(ErrorKind::runtime_error, "{}", d->strings[ip->a]);
      NIMBLE_CASE(ScalarBinary) {
        const auto op = static_cast<ScalarOp>(ip->aux);
        const DType t = scalar_dtype(r[ip->a]);
        const std::int64_t x = scalar_binary(op, read_scalar(r[ip->a]), read_scalar(r[ip->b]), t);
        set_scalar(r[ip->dst], x, yields_bool(op) ? DType::boolean : t);
        ++pc;
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
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(TensorDim) {
        const Tensor& t = tensor_of(r[ip->a]);
        if (ip->b >= t.rank())
          throw_error(ErrorKind::out_of_range, "dim {} of a rank-{} tensor", ip->b, t.rank());
        set_scalar(r[ip->dst], t.shape()[ip->b], DType::i64);
        ++pc;
        NIMBLE_NEXT();
      }
      NIMBLE_CASE(StorageSize) {
        const Shape shape = shape_from(tensor_of(r[ip->a]));
        std::int64_t bytes = static_cast<std::int64_t>(dtype_size(static_cast<DType>(ip->aux)));
        for (std::int64_t e : shape)
          if (__builtin_mul_overflow(bytes, e, &bytes))
            throw_error(ErrorKind::invalid_argument, "a tensor of shape {} is too large",
                        to_string(shape));
        set_scalar(r[ip->dst], bytes, DType::i64);
        ++pc;
        NIMBLE_NEXT();
      }
    }
  }
}
#pragma GCC diagnostic pop
#undef NIMBLE_NEXT
#undef NIMBLE_CASE

void VirtualMachine::Impl::invoke_packed(const Instruction& in, Reg* r, std::uint32_t pc,
                                         bool timed) {
  const PrimitiveInfo& prim = d->primitives[in.a];
  Ref<Kernel>& kernel = site_kernels[pc];
  if (!kernel) kernel = KernelCache::global().get(prim, kernel_provider);
  ++launches;
  const std::uint32_t* list = d->arg_pool.data() + in.b;
  const std::uint32_t num_inputs = in.c - in.d;
  bool tensors = true;
  for (std::uint32_t k = 0; k < num_inputs; ++k)
    tensors = tensors && r[list[k]].kind != Reg::Kind::value;
  kernel_tensors.clear();
  kernel_values.clear();
  kernel_outputs.clear();
  if (tensors) {
    for (std::uint32_t k = 0; k < num_inputs; ++k) kernel_tensors.push_back(tensor_of(r[list[k]]));
  } else {
    for (std::uint32_t k = 0; k < num_inputs; ++k) kernel_values.push_back(value_of(r[list[k]]));
  }
  for (std::uint32_t k = num_inputs; k < in.c; ++k) kernel_outputs.push_back(tensor_of(r[list[k]]));
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    if (tensors)
      kernel->run(kernel_tensors, kernel_outputs);
    else
      kernel->run_values(kernel_values, kernel_outputs);
  } catch (Error& e) {
    throw e.with_context(prim.name);
  }
  if (timed) {
    primitive_calls[in.a] += 1;
    primitive_ns[in.a] += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
  }
}

VirtualMachine::VirtualMachine(Executable executable)
    : impl_(std::make_unique<Impl>(std::move(executable))) {}
VirtualMachine::~VirtualMachine() = default;
VirtualMachine::VirtualMachine(VirtualMachine&&) noexcept = default;
VirtualMachine& VirtualMachine::operator=(VirtualMachine&&) noexcept = default;

const Executable& VirtualMachine::executable() const noexcept { return impl_->exe; }

Value VirtualMachine::invoke(std::string_view function, std::vector<Value> args) {
  const ExecutableData& d = *impl_->d;
  const std::int64_t index = d.find_function(function);
  if (index < 0)
    throw_error(ErrorKind::invalid_argument, "invoke: the executable has no function @{}", function);
  const VMFunction& f = d.functions[static_cast<std::size_t>(index)];
  if (!f.is_entry)
    throw_error(ErrorKind::invalid_argument, "invoke: @{} is not an entry point", function);
  if (args.size() != f.param_types.size())
    throw_error(ErrorKind::type_error, "@{}: expected {} arguments, got {}", function,
                f.param_types.size(), args.size());
  ArgumentChecker checker(d.adts, function);
  for (std::size_t i = 0; i < args.size(); ++i)
    checker.check(i, f.param_names[i], f.param_types[i], args[i]);

  const auto start = std::chrono::steady_clock::now();
  Value result;
  try {
    result = impl_->profiling ? impl_->run<true>(static_cast<std::uint32_t>(index), args)
                              : impl_->run<false>(static_cast<std::uint32_t>(index), args);
  } catch (...) {
    stats::count_kernel_launches(std::exchange(impl_->launches, 0));
    // Leave the VM ready for the next call: drop every frame and register.
    impl_->frames.clear();
    impl_->call_args.clear();
    std::fill(impl_->regs.begin(), impl_->regs.end(), Reg{});
    throw;
  }
  stats::count_kernel_launches(std::exchange(impl_->launches, 0));
  if (impl_->profiling)
    impl_->total_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count());
  return result;
}

void VirtualMachine::set_kernel_provider(std::string provider) {
  impl_->kernel_provider = std::move(provider);
  std::fill(impl_->site_kernels.begin(), impl_->site_kernels.end(), Ref<Kernel>{});
}

void VirtualMachine::set_profiling(bool on) {
  impl_->profiling = on;
  impl_->opcode_counts.fill(0);
  std::fill(impl_->primitive_calls.begin(), impl_->primitive_calls.end(), 0);
  std::fill(impl_->primitive_ns.begin(), impl_->primitive_ns.end(), 0);
  impl_->total_ns = 0;
}

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
