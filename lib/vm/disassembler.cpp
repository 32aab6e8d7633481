// Executable::disassemble: a stable, readable listing (tests compare it).
// Operands print by their kind in opcodes.def, so a new instruction needs no
// code here. Indices are checked even though the data is verified: a
// debugging aid must not crash on the data it is asked to explain.
#include "nimble/vm/executable.hpp"

#include <fmt/format.h>

#include <array>

#include "vm/executable_data.hpp"

namespace nimble::vm {

namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
  }
  out += '"';
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& pool, std::uint32_t index) {
  if (index >= pool.size() || pool[index] < 0 ||
      static_cast<std::uint64_t>(pool[index]) > pool.size() - index - 1)
    return fmt::format("<bad shape {}>", index);
  const auto begin = pool.begin() + index + 1;
  return fmt::format("[{}]", fmt::join(begin, begin + pool[index], ", "));
}

class Disassembler {
 public:
  explicit Disassembler(const ExecutableData& data) : data_(data) {}

  std::string run() {
    for (std::size_t i = 0; i < data_.functions.size(); ++i) {
      if (i) out_ += '\n';
      function(data_.functions[i]);
    }
    tables();
    return std::move(out_);
  }

 private:
  void function(const VMFunction& f) {
    std::string params;
    for (std::size_t i = 0; i < f.param_names.size(); ++i) {
      if (i) params += ", ";
      params += fmt::format("%{}", f.param_names[i]);
      if (i < f.param_types.size()) params += fmt::format(": {}", to_string(f.param_types[i]));
    }
    out_ += fmt::format("def @{}({}) -> {}  // {}registers: {}\n", f.name, params,
                        to_string(f.result_type), f.is_entry ? "entry, " : "", f.num_registers);
    for (std::uint32_t i = 0; i < f.code_size; ++i) {
      const std::uint64_t at = std::uint64_t{f.code_begin} + i;
      if (at >= data_.code.size()) {
        out_ += fmt::format("{:>6}  <outside the code>\n", i);
        break;
      }
      out_ += fmt::format("{:>6}  {}\n", i, instruction(data_.code[at], i));
    }
  }

  std::string instruction(const Instruction& ins, std::uint32_t index) const {
    if (static_cast<std::size_t>(ins.opcode) >= kNumOpcodes)
      return fmt::format("<invalid opcode {}>", static_cast<unsigned>(ins.opcode));
    const OpcodeInfo& op = info(ins.opcode);
    const std::array<std::uint32_t, 5> v = {ins.dst, ins.a, ins.b, ins.c, ins.d};
    std::vector<std::string> operands;
    for (std::size_t i = 0; i < v.size(); ++i) {
      switch (op.fields[i]) {
        case Operand::none:
        case Operand::count:
        case Operand::outputs: break;  // count and outputs print with their args
        case Operand::reg: operands.push_back(reg(v[i])); break;
        case Operand::func:
          operands.push_back(v[i] < data_.functions.size()
                                 ? fmt::format("@{}", data_.functions[v[i]].name)
                                 : fmt::format("<bad function {}>", v[i]));
          break;
        case Operand::const_: operands.push_back(fmt::format("const#{}", v[i])); break;
        case Operand::packed:
          operands.push_back(v[i] < data_.primitives.size() ? data_.primitives[v[i]].name
                                                            : fmt::format("<bad primitive {}>", v[i]));
          break;
        case Operand::str:
          operands.push_back(v[i] < data_.strings.size() ? quote(data_.strings[v[i]])
                                                         : fmt::format("<bad string {}>", v[i]));
          break;
        case Operand::shape: operands.push_back(shape_text(data_.shape_pool, v[i])); break;
        case Operand::args: {
          const bool has_outputs = i + 2 < v.size() && op.fields[i + 2] == Operand::outputs;
          operands.push_back(args(v[i], v[i + 1], has_outputs ? v[i + 2] : 0, has_outputs));
          break;
        }
        case Operand::jump:
          operands.push_back(fmt::format("→ {}", std::int64_t{index} + jump_offset(v[i])));
          break;
        case Operand::imm: operands.push_back(std::to_string(v[i])); break;
        case Operand::device: {
          const std::optional<Device> device = decode_device(v[i]);
          operands.push_back(device ? to_string(*device) : fmt::format("<bad device {:#x}>", v[i]));
          break;
        }
        case Operand::tag:
          operands.push_back(v[i] == kTupleTag ? std::string("tuple") : fmt::format("tag {}", v[i]));
          break;
        case Operand::dtype:
        case Operand::scalar: break;  // aux only
      }
    }
    if (op.aux == Operand::dtype)
      operands.push_back(ins.aux < std::size(kAllDTypes)
                             ? std::string(to_string(static_cast<DType>(ins.aux)))
                             : fmt::format("<bad dtype {}>", ins.aux));
    if (op.aux == Operand::scalar)
      operands.push_back(ins.aux < kNumScalarOps
                             ? std::string(scalar_op_name(static_cast<ScalarOp>(ins.aux)))
                             : fmt::format("<bad scalar op {}>", ins.aux));
    return fmt::format("{:<15} {}", op.name, fmt::join(operands, ", "));
  }

  static std::string reg(std::uint32_t r) { return fmt::format("$r{}", r); }

  // "($r1, $r2)", or "($r1) -> ($r2)" when the last `outputs` are outputs.
  std::string args(std::uint32_t offset, std::uint32_t count, std::uint32_t outputs,
                   bool has_outputs) const {
    if (std::uint64_t{offset} + count > data_.arg_pool.size() || outputs > count)
      return fmt::format("<bad arguments {}+{}>", offset, count);
    std::string in, out;
    for (std::uint32_t i = 0; i < count; ++i) {
      std::string& list = i < count - outputs ? in : out;
      if (!list.empty()) list += ", ";
      list += reg(data_.arg_pool[offset + i]);
    }
    if (!has_outputs) return fmt::format("({})", in);
    return fmt::format("({}) -> ({})", in, out);
  }

  void tables() {
    if (!data_.constants.empty()) {
      out_ += "\nconstants:\n";
      for (std::size_t i = 0; i < data_.constants.size(); ++i) {
        const Tensor& t = data_.constants[i];
        out_ += t.defined() ? fmt::format("  const#{}  {}{}\n", i, to_string(t.dtype()),
                                          to_string(t.shape()))
                            : fmt::format("  const#{}  <undefined>\n", i);
      }
    }
    if (!data_.primitives.empty()) {
      out_ += "\nprimitives:\n";
      for (std::size_t i = 0; i < data_.primitives.size(); ++i) {
        const PrimitiveInfo& p = data_.primitives[i];
        out_ += fmt::format("  #{}  {}  {}  hash {:#018x}  inputs {}, outputs {}{}\n", i, p.name,
                            p.kind == PrimitiveKind::compute ? "compute" : "shape_function", p.hash,
                            p.num_inputs, p.num_outputs,
                            p.device.is_cpu() ? std::string() : fmt::format("  on {}", to_string(p.device)));
      }
    }
    if (!data_.strings.empty()) {
      out_ += "\nstrings:\n";
      for (std::size_t i = 0; i < data_.strings.size(); ++i)
        out_ += fmt::format("  #{}  {}\n", i, quote(data_.strings[i]));
    }
    if (!data_.adts.empty()) {
      out_ += "\ntypes:\n";
      for (const AdtDesc& adt : data_.adts) adt_text(adt);
    }
  }

  void adt_text(const AdtDesc& adt) {
    out_ += fmt::format("  type {}", adt.name);
    if (!adt.type_params.empty()) out_ += fmt::format("<{}>", fmt::join(adt.type_params, ", "));
    out_ += " =";
    for (std::size_t i = 0; i < adt.constructors.size(); ++i) {
      const ConstructorDesc& c = adt.constructors[i];
      out_ += fmt::format("{} {}", i ? " |" : "", c.name);
      if (c.fields.empty()) continue;
      out_ += '(';
      for (std::size_t j = 0; j < c.fields.size(); ++j) {
        if (j) out_ += ", ";
        out_ += to_string(c.fields[j]);
      }
      out_ += ')';
    }
    out_ += '\n';
  }

  const ExecutableData& data_;
  std::string out_;
};

}  // namespace

std::string Executable::disassemble() const { return Disassembler(*data_).run(); }

}  // namespace nimble::vm
