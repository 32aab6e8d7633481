// The CompileReport (nimble/compile.hpp): what the bytecode of each function
// calls and allocates, read off the final instruction stream, and a Graphviz
// view of the fused program.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_map>

#include "ir/visitor.hpp"
#include "compiler/bytecode/compiler.hpp"

namespace nimble {

namespace vm {

void fill_report(const BytecodeModule& module, CompileReport& report) {
  const ExecutableData& data = module.data;
  report.functions.clear();
  for (std::size_t f = 0; f < data.functions.size(); ++f) {
    CompileReport::Function out;
    out.name = data.functions[f].name;
    out.planned_peak_bytes = module.functions[f].plan.arena_bytes;
    out.planned_lower_bound_bytes = module.functions[f].plan.lower_bound_bytes;
    // Each storage size is computed just before its AllocStorage: a
    // LoadConsti (static) or a StorageSize of a run-time shape (dynamic).
    std::unordered_map<std::uint32_t, std::uint64_t> constant_of;
    for (const Instruction& in : module.functions[f].code) {
      if (in.opcode == Opcode::InvokePacked) {
        const PrimitiveInfo& prim = data.primitives[in.a];
        if (prim.kind == PrimitiveKind::shape_function) {
          ++out.shape_functions;
        } else {
          ++out.kernels;
          const std::vector<std::string>& ops = module.primitive_ops[in.a];
          bool listed = false;
          for (const CompileReport::FusedKernel& k : out.fused) listed = listed || k.name == prim.name;
          if (!ops.empty() && !listed) out.fused.push_back({prim.name, ops});
        }
      }
      if (in.opcode == Opcode::AllocStorage) {
        if (const auto it = constant_of.find(in.a); it != constant_of.end()) {
          ++out.static_allocations;
          out.static_bytes += it->second;
        } else {
          ++out.dynamic_allocations;
        }
      }
      if (in.opcode == Opcode::AllocFreshTensor) {
        ++out.static_allocations;
        out.static_bytes += fresh_tensor_bytes(data.shape_pool, in);
      }
      if (info(in.opcode).fields[0] == Operand::reg) constant_of.erase(in.dst);
      if (in.opcode == Opcode::LoadConsti) constant_of[in.dst] = std::uint64_t{in.a} | (std::uint64_t{in.b} << 32);
    }
    report.functions.push_back(std::move(out));
  }
}

namespace {

// One node per call (an op, a fused kernel, a function), one edge per
// variable from the call that made it to each call that reads it.
class DotWriter final : public ir::ExprVisitor {
 public:
  explicit DotWriter(std::string& out) : out_(out) {}

  void function(const std::string& name, const ir::FunctionNode& fn, int index) {
    out_ += fmt::format("  subgraph cluster_{} {{\n    label=\"@{}\";\n", index, name);
    for (const ir::Expr& p : fn.params) {
      const std::string id = fmt::format("n{}", next_++);
      out_ += fmt::format("    {} [label=\"%{}\", shape=plaintext];\n", id, p.as<ir::VarNode>()->name);
      producer_[p.get()] = id;
    }
    visit(fn.body);
    out_ += "  }\n";
  }

 protected:
  void visit_let_binding(const ir::Expr&, const ir::LetNode& let) override {
    if (const auto* call = let.value.as<ir::CallNode>()) {
      const std::string id = fmt::format("n{}", next_++);
      out_ += fmt::format("    {} [label=\"{}\"{}];\n", id, label(*call),
                          call->callee.as<ir::FunctionNode>() ? ", style=filled, fillcolor=lightblue" : "");
      for (const ir::Expr& a : call->args)
        if (const auto it = producer_.find(a.get()); it != producer_.end())
          out_ += fmt::format("    {} -> {};\n", it->second, id);
      producer_[let.var.get()] = id;
    }
    visit(let.value);
  }
  void visit_function(const ir::Expr& e, const ir::FunctionNode& fn) override {
    if (!fn.primitive) ExprVisitor::visit_function(e, fn);  // a kernel's body is its node
  }

 private:
  static std::string label(const ir::CallNode& call) {
    if (const auto* op = call.callee.as<ir::OpNode>()) return std::string(op->def->name);
    if (const auto* g = call.callee.as<ir::GlobalVarNode>()) return "@" + g->name;
    if (const auto* fn = call.callee.as<ir::FunctionNode>(); fn && fn->primitive)
      return fmt::format("{}", fmt::join(fused_ops(*fn), "\\n"));
    return "call";
  }

  std::string& out_;
  std::unordered_map<const ir::ExprNode*, std::string> producer_;
  int next_ = 0;
};

}  // namespace

std::string fused_program_dot(const ir::Module& module) {
  std::string out = "digraph nimble {\n  node [shape=box, fontname=\"monospace\"];\n";
  DotWriter writer(out);
  int index = 0;
  for (const auto& [name, fn] : module.functions()) writer.function(name, *fn.as<ir::FunctionNode>(), index++);
  out += "}\n";
  return out;
}

}  // namespace vm

std::string CompileReport::table() const {
  std::string out =
      "| function | kernels unfused | kernels | shape functions | static allocations | static bytes "
      "| dynamic allocations | planned peak bytes | lower bound bytes |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Function& f : functions)
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", f.name, f.kernels_unfused,
                       f.kernels, f.shape_functions, f.static_allocations, f.static_bytes,
                       f.dynamic_allocations, f.planned_peak_bytes, f.planned_lower_bound_bytes);
  for (const Function& f : functions) {
    if (f.fused.empty()) continue;
    out += fmt::format("\nfused kernels of {}:\n", f.name);
    for (const FusedKernel& k : f.fused) out += fmt::format("  {} = {}\n", k.name, fmt::join(k.ops, " → "));
  }
  return out;
}

}  // namespace nimble
