// verify(ExecutableData): the load-time check that lets the VM's dispatch
// loop index registers, pools and tables without a bounds check. The operand
// rules come from opcodes.def (one check per Operand kind); only operands
// whose meaning depends on another table (a callee's arity, a primitive's
// inputs and outputs, a unary vs binary scalar op) have per-opcode code.
#include "vm/executable_data.hpp"

#include <fmt/format.h>

#include <array>
#include <map>
#include <optional>

#include "support/check.hpp"
#include "vm/executable_format.hpp"

namespace nimble::vm {

namespace {

// The verifier (and the disassembler) read `args` with the `count` after it
// and `outputs` with the `count` before it; dtype and scalar codes only fit
// in the 8-bit aux field.
constexpr bool operand_layout_is_consistent() {
  for (const OpcodeInfo& op : kOpcodeInfo) {
    for (std::size_t i = 0; i < op.fields.size(); ++i) {
      const Operand kind = op.fields[i];
      const Operand before = i > 0 ? op.fields[i - 1] : Operand::none;
      const Operand after = i + 1 < op.fields.size() ? op.fields[i + 1] : Operand::none;
      if (kind == Operand::args && after != Operand::count) return false;
      if (kind == Operand::count && before != Operand::args) return false;
      if (kind == Operand::outputs && before != Operand::count) return false;
      if (kind == Operand::dtype || kind == Operand::scalar) return false;
    }
    if (op.aux != Operand::none && op.aux != Operand::dtype && op.aux != Operand::scalar)
      return false;
  }
  return true;
}
static_assert(operand_layout_is_consistent(),
              "opcodes.def: `args` must be followed by `count`, `outputs` must follow `count`, "
              "and dtype/scalar operands belong in aux");

constexpr std::array<std::string_view, 5> kFieldNames = {"dst", "a", "b", "c", "d"};

constexpr bool is_terminator(Opcode op) noexcept {
  return op == Opcode::Ret || op == Opcode::TailCall || op == Opcode::Goto || op == Opcode::Fatal;
}

// decode_device accepts it, and a CPU has only index 0 (so that each device
// has one code, and Device equality in the VM means the same device).
bool is_valid_device(std::uint32_t code) noexcept {
  const std::optional<Device> device = decode_device(code);
  return device && (!device->is_cpu() || device->index == 0);
}

constexpr bool is_valid_dtype(std::uint32_t code) noexcept { return code < std::size(kAllDTypes); }

// Why `type` cannot be printed or checked, or nullopt when it is well formed.
std::optional<std::string> malformed(const TypeDesc& type, std::size_t depth = 1) {
  if (depth > format::kMaxTypeDepth)
    return fmt::format("it nests deeper than {} levels", format::kMaxTypeDepth);
  switch (type.kind) {
    case TypeDesc::Kind::tensor:
      if (!is_valid_dtype(static_cast<std::uint32_t>(type.dtype)))
        return fmt::format("invalid dtype code {}", static_cast<unsigned>(type.dtype));
      for (std::size_t i = 0; i < type.dims.size(); ++i) {
        const DimDesc& d = type.dims[i];
        switch (d.kind) {
          case DimDesc::Kind::fixed:
            if (d.value < 0) return fmt::format("dim {} is {}, but dims must be >= 0", i, d.value);
            break;
          case DimDesc::Kind::any: break;
          case DimDesc::Kind::symbol:
            if (d.name.empty()) return fmt::format("dim {} is a symbol without a name", i);
            if (d.value < -1)
              return fmt::format("dim {} ({}) has the bound {}, but bounds must be >= 0", i,
                                 d.name, d.value);
            break;
          default:
            return fmt::format("dim {} has the invalid kind {}", i, static_cast<unsigned>(d.kind));
        }
      }
      return std::nullopt;
    case TypeDesc::Kind::func:
      if (type.fields.empty()) return "a function type without a result";
      [[fallthrough]];
    case TypeDesc::Kind::tuple:
    case TypeDesc::Kind::adt:
    case TypeDesc::Kind::type_var:
      for (const TypeDesc& field : type.fields)
        if (auto why = malformed(field, depth + 1)) return why;
      return std::nullopt;
  }
  return fmt::format("invalid type kind {}", static_cast<unsigned>(type.kind));
}

class Verifier {
 public:
  explicit Verifier(const ExecutableData& data) : data_(data) {}

  void run() {
    check_tables();
    std::map<std::string_view, std::size_t> names;
    for (std::size_t i = 0; i < data_.functions.size(); ++i) {
      const VMFunction& f = data_.functions[i];
      if (auto [it, inserted] = names.emplace(f.name, i); !inserted)
        throw_error(ErrorKind::parse_error, "functions {} and {} are both named @{}", it->second,
                    i, f.name);
      check_function(f);
    }
  }

 private:
  void check_tables() const {
    for (std::size_t i = 0; i < data_.constants.size(); ++i)
      if (!data_.constants[i].defined())
        throw_error(ErrorKind::parse_error, "constant {} is undefined", i);
    for (std::size_t i = 0; i < data_.primitives.size(); ++i) {
      const PrimitiveInfo& p = data_.primitives[i];
      if (p.kind != PrimitiveKind::compute && p.kind != PrimitiveKind::shape_function)
        throw_error(ErrorKind::parse_error, "primitive {} ({}): invalid kind {}", i, p.name,
                    static_cast<unsigned>(p.kind));
      if (const std::uint64_t h = content_hash(p.kind, p.source, p.device); h != p.hash)
        throw_error(ErrorKind::parse_error,
                    "primitive {} ({}): hash {:#018x} does not match its content ({:#018x})", i,
                    p.name, p.hash, h);
    }
    for (const AdtDesc& adt : data_.adts)
      for (const ConstructorDesc& ctor : adt.constructors)
        for (std::size_t i = 0; i < ctor.fields.size(); ++i)
          if (auto why = malformed(ctor.fields[i]))
            throw_error(ErrorKind::parse_error, "type {}: field {} of constructor {} is malformed: {}",
                        adt.name, i, ctor.name, *why);
  }

  void check_function(const VMFunction& f) {
    if (f.param_names.size() != f.param_types.size())
      throw_error(ErrorKind::parse_error, "@{}: {} parameter names but {} parameter types", f.name,
                  f.param_names.size(), f.param_types.size());
    if (f.num_registers < f.param_names.size())
      throw_error(ErrorKind::parse_error, "@{}: {} registers cannot hold its {} parameters", f.name,
                  f.num_registers, f.param_names.size());
    for (std::size_t i = 0; i < f.param_types.size(); ++i)
      if (auto why = malformed(f.param_types[i]))
        throw_error(ErrorKind::parse_error, "@{}: the type of parameter {} (%{}) is malformed: {}",
                    f.name, i, f.param_names[i], *why);
    if (auto why = malformed(f.result_type))
      throw_error(ErrorKind::parse_error, "@{}: the result type is malformed: {}", f.name, *why);
    if (f.code_size == 0) throw_error(ErrorKind::parse_error, "@{}: the function has no code", f.name);
    if (std::uint64_t{f.code_begin} + f.code_size > data_.code.size())
      throw_error(ErrorKind::parse_error,
                  "@{}: code [{}, {}) is outside the executable's {} instructions", f.name,
                  f.code_begin, std::uint64_t{f.code_begin} + f.code_size, data_.code.size());

    function_ = &f;
    for (index_ = 0; index_ < f.code_size; ++index_) check_instruction(data_.code[f.code_begin + index_]);
    const Instruction& last = data_.code[f.code_begin + f.code_size - 1];
    if (!is_terminator(last.opcode))
      throw_error(ErrorKind::parse_error,
                  "@{}: the last instruction ({}, {}) is not Ret, TailCall, Goto or Fatal", f.name,
                  f.code_size - 1, info(last.opcode).name);
  }

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw_error(ErrorKind::parse_error, "@{}, instruction {} ({}): {}", function_->name, index_,
                info(opcode_).name, fmt::format(format, std::forward<Args>(args)...));
  }

  void check_register(std::uint32_t reg) const {
    if (reg >= function_->num_registers)
      fail("register {} out of range (the function has {})", reg, function_->num_registers);
  }

  void check_index(std::uint32_t index, std::size_t size, std::string_view what) const {
    if (index >= size) fail("{} {} out of range (the executable has {})", what, index, size);
  }

  void check_instruction(const Instruction& ins) {
    if (static_cast<std::size_t>(ins.opcode) >= kNumOpcodes)
      throw_error(ErrorKind::parse_error, "@{}, instruction {}: opcode {} out of range (there are {})",
                  function_->name, index_, static_cast<unsigned>(ins.opcode), kNumOpcodes);
    opcode_ = ins.opcode;
    const OpcodeInfo& op = info(ins.opcode);
    if (ins.reserved != 0) fail("the reserved bits must be 0, got {:#x}", ins.reserved);
    const std::array<std::uint32_t, 5> values = {ins.dst, ins.a, ins.b, ins.c, ins.d};
    for (std::size_t i = 0; i < values.size(); ++i) check_field(op, values, i);
    check_aux(op.aux, ins.aux);
    check_meaning(ins);
  }

  void check_field(const OpcodeInfo& op, const std::array<std::uint32_t, 5>& values,
                   std::size_t i) const {
    const std::uint32_t v = values[i];
    switch (op.fields[i]) {
      case Operand::none:
        if (v != 0) fail("field {} must be 0, got {}", kFieldNames[i], v);
        return;
      case Operand::reg: check_register(v); return;
      case Operand::func: check_index(v, data_.functions.size(), "function"); return;
      case Operand::const_: check_index(v, data_.constants.size(), "constant"); return;
      case Operand::packed: check_index(v, data_.primitives.size(), "primitive"); return;
      case Operand::str: check_index(v, data_.strings.size(), "string"); return;
      case Operand::shape: check_shape(v); return;
      case Operand::args: check_args(v, values[i + 1]); return;
      case Operand::count: return;  // with `args`
      case Operand::outputs:
        if (v > values[i - 1]) fail("{} outputs out of {} arguments", v, values[i - 1]);
        return;
      case Operand::jump: {
        const std::int64_t target = std::int64_t{index_} + jump_offset(v);
        if (target < 0 || target >= std::int64_t{function_->code_size})
          fail("jump to {} is outside the function (instructions 0 to {})", target,
               function_->code_size - 1);
        return;
      }
      case Operand::imm:
      case Operand::tag: return;  // any value; ADT tags are checked when the value is used
      case Operand::device:
        if (!is_valid_device(v)) fail("field {}: invalid device code {:#x}", kFieldNames[i], v);
        return;
      case Operand::dtype:
      case Operand::scalar: break;  // aux only (see operand_layout_is_consistent)
    }
    NIMBLE_ASSERT(false, "an operand kind that opcodes.def does not use in an instruction field");
  }

  void check_shape(std::uint32_t index) const {
    const std::vector<std::int64_t>& pool = data_.shape_pool;
    if (index >= pool.size())
      fail("shape {} out of range (the shape pool has {} entries)", index, pool.size());
    const std::int64_t rank = pool[index];
    if (rank < 0) fail("shape {} has the negative rank {}", index, rank);
    if (static_cast<std::uint64_t>(rank) > pool.size() - index - 1)
      fail("shape {} of rank {} runs past the end of the shape pool ({} entries)", index, rank,
           pool.size());
    for (std::int64_t i = 0; i < rank; ++i)
      if (const std::int64_t d = pool[index + 1 + static_cast<std::size_t>(i)]; d < 0)
        fail("shape {}: dim {} is {}, but dims must be >= 0", index, i, d);
  }

  void check_args(std::uint32_t offset, std::uint32_t count) const {
    const std::vector<std::uint32_t>& pool = data_.arg_pool;
    if (std::uint64_t{offset} + count > pool.size())
      fail("arguments [{}, {}) run past the end of the argument pool ({} entries)", offset,
           std::uint64_t{offset} + count, pool.size());
    for (std::uint32_t i = 0; i < count; ++i)
      if (const std::uint32_t reg = pool[offset + i]; reg >= function_->num_registers)
        fail("argument {}: register {} out of range (the function has {})", i, reg,
             function_->num_registers);
  }

  void check_aux(Operand kind, std::uint8_t aux) const {
    switch (kind) {
      case Operand::none:
        if (aux != 0) fail("field aux must be 0, got {}", aux);
        return;
      case Operand::dtype:
        if (!is_valid_dtype(aux)) fail("invalid dtype code {}", aux);
        return;
      case Operand::scalar:
        if (aux >= kNumScalarOps) fail("invalid scalar op code {}", aux);
        return;
      default: NIMBLE_ASSERT(false, "an aux operand kind other than none, dtype or scalar");
    }
  }

  // Operands whose validity depends on another operand's target.
  void check_meaning(const Instruction& ins) const {
    switch (ins.opcode) {
      case Opcode::Invoke:
      case Opcode::TailCall: {
        const VMFunction& callee = data_.functions[ins.a];
        if (ins.c != callee.param_names.size())
          fail("@{} takes {} arguments, got {}", callee.name, callee.param_names.size(), ins.c);
        return;
      }
      case Opcode::AllocClosure: {
        const VMFunction& callee = data_.functions[ins.a];
        if (ins.c > callee.param_names.size())
          fail("captures {} values, but @{} takes only {} arguments", ins.c, callee.name,
               callee.param_names.size());
        return;
      }
      case Opcode::InvokePacked: {
        const PrimitiveInfo& p = data_.primitives[ins.a];
        const std::uint64_t arity = std::uint64_t{p.num_inputs} + p.num_outputs;
        if (ins.c != arity)
          fail("primitive {} takes {} inputs and {} outputs, got {} arguments", p.name,
               p.num_inputs, p.num_outputs, ins.c);
        if (ins.d != p.num_outputs)
          fail("primitive {} has {} outputs, got {}", p.name, p.num_outputs, ins.d);
        return;
      }
      case Opcode::ScalarUnary:
      case Opcode::ScalarBinary: {
        const auto op = static_cast<ScalarOp>(ins.aux);
        if (is_unary(op) != (ins.opcode == Opcode::ScalarUnary))
          fail("{} is a {} op", scalar_op_name(op), is_unary(op) ? "unary" : "binary");
        return;
      }
      default: return;
    }
  }

  const ExecutableData& data_;
  const VMFunction* function_ = nullptr;
  std::uint32_t index_ = 0;  // within function_
  Opcode opcode_ = Opcode::Move;
};

}  // namespace

void verify(const ExecutableData& data) { Verifier(data).run(); }

}  // namespace nimble::vm
