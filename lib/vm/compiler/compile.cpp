// The bytecode compiler's driver and nimble::compile (see compiler.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <mutex>

#include "codegen/cpu/cpu_kernel.hpp"
#include "eval/reference_provider.hpp"
#include "nimble/compile.hpp"
#include "nimble/runtime/allocator.hpp"
#include "passes/passes.hpp"
#include "support/check.hpp"
#include "vm/compiler/compiler.hpp"
#include "vm/compiler/signature_from_ir.hpp"

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

ModuleCompiler::ModuleCompiler(const ir::Module& module, Options options)
    : module_(module), options_(options) {}

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

ExecutableData ModuleCompiler::run() {
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
    code_[p.index] = fc.take_code();
    std::uint32_t num_virtual = fc.num_registers();
    plan_stats_.resize(data_.functions.size());
    if (options_.plan_memory)
      num_virtual = plan_memory(code_[p.index], data_.arg_pool, fc.num_params(), num_virtual,
                                &plan_stats_[p.index]);
    fuse_fresh_tensors(code_[p.index], data_.arg_pool, num_virtual);
    insert_kills(code_[p.index], data_.arg_pool, num_virtual);
    const std::uint32_t frame =
        allocate_registers(code_[p.index], data_.arg_pool, fc.num_params(), num_virtual);
    data_.functions[p.index].num_registers = std::max<std::uint32_t>(1, frame);
  }
  for (std::size_t i = 0; i < data_.functions.size(); ++i) {
    VMFunction& f = data_.functions[i];
    f.code_begin = static_cast<std::uint32_t>(data_.code.size());
    f.code_size = static_cast<std::uint32_t>(code_[i].size());
    data_.code.insert(data_.code.end(), code_[i].begin(), code_[i].end());
  }
  plan_stats_.resize(data_.functions.size());
  if (options_.report) fill_report(*options_.report);
  return std::move(data_);
}

}  // namespace vm

vm::Executable compile(const ir::Module& module, const CompileOptions& options) {
  static std::once_flag providers;
  std::call_once(providers, [] {
    register_reference_provider();
    codegen::register_jit_provider();
  });
  // The pipeline, in order:
  //  3. split_to_slices, then fuse_ops: a split's parts become slices,
  //     which fuse into their readers (a split's tuple fuses with nothing);
  //     the bytecode compiler manifests memory per kernel, so each fused
  //     group gets its outputs' allocations (and one launch);
  //  5. the bytecode compiler: manifest memory, shape computation, lambda
  //     lifting, match compilation, then per function memory planning
  //     (which needs the final instruction stream's liveness), a kill after
  //     each value's last use (of the planned stream) and register
  //     allocation (last: kills count as definitions there).
  const auto after = [&](std::string_view pass, const ir::Module& m) {
#ifndef NDEBUG
    ir::verify(m);  // a pass that breaks the IR is caught where it does
#endif
    if (options.dump_ir) std::fprintf(stderr, "// after %.*s\n%s\n", static_cast<int>(pass.size()),
                                      pass.data(), ir::print(m, {.show_types = true}).c_str());
  };
  //  1. simplify: folding and CSE leave fewer ops for fusion to group, and
  //     dead code goes before it allocates anything;
  ir::Module optimized = module;
  if (options.simplify) {
    optimized = passes::simplify(optimized);
    after("simplify", optimized);
  }
  //  2. pretranspose_weights: constant weights in the layout the faster
  //     product reads, once (after folding, which may make them constant;
  //     before fusion, which then takes the bias add as an epilogue);
  if (options.simplify) {
    optimized = passes::pretranspose_weights(optimized);
    after("pretranspose_weights", optimized);
  }
  if (options.fuse_ops) {
    optimized = passes::split_to_slices(optimized);
    after("split_to_slices", optimized);
    optimized = passes::fuse_ops(optimized);
    after("fuse_ops", optimized);
  }
  //  4. place_devices: after fusion, so that a fused group is one kernel on
  //     one device and copies go only between kernels, never inside one;
  //     before the bytecode compiler, which allocates each value where it
  //     was placed.
  if (options.result_device != Device::cpu() && options.result_device != options.target)
    throw_error(ErrorKind::invalid_argument,
                "compile: result_device must be the CPU or the target ({}), got {}", to_string(options.target),
                to_string(options.result_device));
  if (!options.target.is_cpu()) {
    optimized = passes::place_devices(optimized, options.target, options.result_device);
    after("place_devices", optimized);
    // No device is needed to compile: kernels are made for it on first use
    // (the JIT: GPU kernels for a GPU's memory, host kernels for memory the
    // host reads, such as a second device in tests).
  }
  auto data = std::make_shared<vm::ExecutableData>(
      vm::ModuleCompiler(optimized, {.plan_memory = options.plan_memory, .report = options.report,
                                     .target = options.target})
          .run());
  if (options.report) {
    CompileReport unfused;
    (void)vm::ModuleCompiler(module, {.plan_memory = false, .report = &unfused}).run();
    for (CompileReport::Function& f : options.report->functions)
      for (const CompileReport::Function& u : unfused.functions)
        if (u.name == f.name) f.kernels_unfused = u.kernels;
    options.report->dot = vm::fused_program_dot(optimized);
  }
  vm::verify(*data);  // the emitter's own check: a failure here is a compiler bug
  return vm::Executable(std::move(data));
}

}  // namespace nimble
