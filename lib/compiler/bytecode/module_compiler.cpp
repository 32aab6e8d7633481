// ModuleCompiler: the state of one module's lowering to bytecode, and
// lower_to_bytecode (compiler.hpp).
#include "compiler/bytecode/compiler.hpp"
#include "ir/signature_from_ir.hpp"
#include "support/check.hpp"

namespace nimble {

namespace vm {

namespace {

std::vector<const ir::VarNode*> param_vars(const ir::FunctionNode& fn) {
  std::vector<const ir::VarNode*> out;
  for (const ir::Expr& p : fn.params) out.push_back(p.as<ir::VarNode>());
  return out;
}

const ir::Type& var_type(const ir::VarNode& v) {
  return v.type_annotation.defined() ? v.type_annotation : v.checked_type;
}

}  // namespace

ModuleCompiler::ModuleCompiler(const ir::Module& module, Device target) : module_(module), target_(target) {}

std::uint32_t ModuleCompiler::global_index(const std::string& name) const {
  auto it = globals_.find(name);
  NIMBLE_ASSERT(it != globals_.end(), "globals are defined (the verifier checked)");
  return it->second;
}

std::uint32_t ModuleCompiler::lift(const ir::FunctionNode& fn, std::vector<const ir::VarNode*> captured,
                                   const ir::VarNode* self, const std::string& name) {
  VMFunction f;
  f.name = name;
  for (const ir::VarNode* v : captured) {
    f.param_names.push_back(v->name);
    f.param_types.push_back(to_type_desc(var_type(*v)));
  }
  for (const ir::VarNode* p : param_vars(fn)) {
    f.param_names.push_back(p->name);
    f.param_types.push_back(to_type_desc(var_type(*p)));
  }
  f.result_type = to_type_desc(fn.ret_type.defined() ? fn.ret_type : fn.body.type());
  const auto index = static_cast<std::uint32_t>(data_.functions.size());
  data_.functions.push_back(std::move(f));
  code_.emplace_back();
  pending_.push_back({&fn, std::move(captured), self, index});
  return index;
}

std::uint32_t ModuleCompiler::constant(const ir::ConstantNode& c) {
  auto [it, inserted] = constants_.emplace(&c, 0);
  if (inserted) it->second = constant(c.value);
  return it->second;
}

std::uint32_t ModuleCompiler::constant(Tensor t) {
  data_.constants.push_back(std::move(t));
  return static_cast<std::uint32_t>(data_.constants.size() - 1);
}

std::uint32_t ModuleCompiler::string(std::string s) {
  for (std::size_t i = 0; i < data_.strings.size(); ++i)
    if (data_.strings[i] == s) return static_cast<std::uint32_t>(i);
  data_.strings.push_back(std::move(s));
  return static_cast<std::uint32_t>(data_.strings.size() - 1);
}

std::uint32_t ModuleCompiler::shape(std::span<const std::int64_t> dims) {
  const auto index = static_cast<std::uint32_t>(data_.shape_pool.size());
  data_.shape_pool.push_back(static_cast<std::int64_t>(dims.size()));
  data_.shape_pool.insert(data_.shape_pool.end(), dims.begin(), dims.end());
  return index;
}

std::uint32_t ModuleCompiler::args(std::span<const std::uint32_t> regs) {
  const auto index = static_cast<std::uint32_t>(data_.arg_pool.size());
  data_.arg_pool.insert(data_.arg_pool.end(), regs.begin(), regs.end());
  return index;
}

BytecodeModule ModuleCompiler::run() {
  data_.adts = adt_descs(module_);
  for (const auto& [name, expr] : module_.functions()) {
    const auto* fn = expr.as<ir::FunctionNode>();
    globals_.emplace(name, static_cast<std::uint32_t>(data_.functions.size()));
    const std::uint32_t index = lift(*fn, {}, nullptr, name);
    data_.functions[index].is_entry = module_.is_entry(name);
  }
  while (!pending_.empty()) {
    const Pending p = pending_.front();
    pending_.pop_front();
    FunctionCompiler fc(*this, p.index);
    const std::vector<const ir::VarNode*> params = param_vars(*p.fn);
    fc.bind_params(p.captured, params, p.self);
    fc.compile_body(p.fn->body);
    BytecodeFunction& out = code_[p.index];
    out.code = fc.take_code();
    out.num_params = fc.num_params();
    out.num_virtual = fc.num_registers();
  }
  return {.data = std::move(data_), .functions = std::move(code_), .primitive_ops = std::move(primitive_ops_)};
}

BytecodeModule lower_to_bytecode(const ir::Module& module, Device target) {
  return ModuleCompiler(module, target).run();
}

}  // namespace vm

}  // namespace nimble
