// Expressions → bytecode for one function. Every sub-expression gets its own
// register (A-normal form on the fly; registers are not reused yet), calls in
// tail position become TailCall, and closures are lifted to VM functions.
#include <fmt/format.h>

#include "support/check.hpp"
#include "compiler/bytecode/compiler.hpp"
#include "support/stack_guard.hpp"

namespace nimble::vm {

FunctionCompiler::FunctionCompiler(ModuleCompiler& mc, std::uint32_t self_index)
    : mc_(mc), self_index_(self_index) {}

void FunctionCompiler::bind_params(std::span<const ir::VarNode* const> captured,
                                   std::span<const ir::VarNode* const> params,
                                   const ir::VarNode* self) {
  std::vector<std::uint32_t> captured_regs;
  for (const ir::VarNode* v : captured) {
    captured_regs.push_back(new_reg());
    bind(v, {.reg = captured_regs.back(), .func = -1, .captured = {}});
  }
  for (const ir::VarNode* p : params) bind(p, {.reg = new_reg(), .func = -1, .captured = {}});
  num_params_ = next_reg_;
  // A loop calls itself directly, passing its own captures on.
  if (self) bind(self, {.reg = kNoReg, .func = self_index_, .captured = std::move(captured_regs)});
}

void FunctionCompiler::patch_jump(std::size_t at, int field, std::size_t target) {
  const std::uint32_t offset =
      encode_jump(static_cast<std::int32_t>(static_cast<std::int64_t>(target) - static_cast<std::int64_t>(at)));
  Instruction& in = code_[at];
  (field == 0 ? in.a : field == 1 ? in.b : in.c) = offset;
}

const ir::Expr* FunctionCompiler::definition(const ir::VarNode* var) const {
  auto it = defs_.find(var);
  return it == defs_.end() ? nullptr : &it->second;
}

std::uint32_t FunctionCompiler::var_reg(const ir::VarNode* var) {
  auto it = env_.find(var);
  NIMBLE_ASSERT(it != env_.end(), "variables are bound (the verifier checked)");
  const Binding& b = it->second;
  if (b.reg != kNoReg) return b.reg;
  // A known closure used as a value: make the closure object here.
  const std::uint32_t dst = new_reg();
  emit({.opcode = Opcode::AllocClosure, .dst = dst, .a = static_cast<std::uint32_t>(b.func),
        .b = mc_.args(b.captured), .c = static_cast<std::uint32_t>(b.captured.size())});
  return dst;
}

std::vector<std::uint32_t> FunctionCompiler::compile_args(const std::vector<ir::Expr>& args) {
  std::vector<std::uint32_t> regs;
  regs.reserve(args.size());
  for (const ir::Expr& a : args) regs.push_back(compile_value(a));
  return regs;
}

std::uint32_t FunctionCompiler::alloc_closure(const ir::FunctionNode& fn, const ir::VarNode* self,
                                              const std::string& name) {
  std::vector<const ir::VarNode*> captured = free_vars(fn, self);
  std::vector<std::uint32_t> regs;
  for (const ir::VarNode* v : captured) regs.push_back(var_reg(v));
  const std::uint32_t func = mc_.lift(fn, std::move(captured), self, name);
  if (self) {
    // Calls through `self` in the enclosing function go straight to `func`.
    bind(self, {.reg = kNoReg, .func = func, .captured = regs});
    return kNoReg;
  }
  const std::uint32_t dst = new_reg();
  emit({.opcode = Opcode::AllocClosure, .dst = dst, .a = func, .b = mc_.args(regs),
        .c = static_cast<std::uint32_t>(regs.size())});
  return dst;
}

void FunctionCompiler::bind_let(const ir::LetNode& let) {
  const auto* var = let.var.as<ir::VarNode>();
  if (const auto* fn = let.value.as<ir::FunctionNode>()) {
    alloc_closure(*fn, var, fmt::format("{}.{}", mc_.data().functions[self_index_].name, var->name));
    return;
  }
  defs_[var] = let.value;
  bind(var, {.reg = compile_value(let.value), .func = -1, .captured = {}});
}

std::uint32_t FunctionCompiler::compile_value(const ir::Expr& e) {
  check_stack("the bytecode compiler");
  switch (e.kind()) {
    case ir::ExprKind::var: return var_reg(e.as<ir::VarNode>());
    case ir::ExprKind::constant: {
      const auto& c = *e.as<ir::ConstantNode>();
      const std::uint32_t dst = new_reg();
      const DType t = c.value.dtype();
      if (c.value.rank() == 0 && (t == DType::i64 || t == DType::i32 || t == DType::boolean)) {
        const std::int64_t v = t == DType::i64 ? *c.value.data<std::int64_t>()
                               : t == DType::i32 ? *c.value.data<std::int32_t>()
                                                 : (*c.value.data<bool>() ? 1 : 0);
        const auto bits = static_cast<std::uint64_t>(v);
        emit({.opcode = Opcode::LoadConsti, .aux = static_cast<std::uint8_t>(t), .dst = dst,
              .a = static_cast<std::uint32_t>(bits), .b = static_cast<std::uint32_t>(bits >> 32)});
      } else {
        emit({.opcode = Opcode::LoadConst, .dst = dst, .a = mc_.constant(c)});
      }
      return dst;
    }
    case ir::ExprKind::global_var: {
      const std::uint32_t dst = new_reg();
      emit({.opcode = Opcode::AllocClosure, .dst = dst,
            .a = mc_.global_index(e.as<ir::GlobalVarNode>()->name)});
      return dst;
    }
    case ir::ExprKind::constructor: {
      const std::uint32_t dst = new_reg();
      emit({.opcode = Opcode::AllocADT, .dst = dst, .a = e.as<ir::ConstructorNode>()->tag,
            .b = mc_.args({})});
      return dst;
    }
    case ir::ExprKind::op:
      throw_error(ErrorKind::not_supported, "not supported: an operator used as a value");
    case ir::ExprKind::call: return compile_call(*e.as<ir::CallNode>(), false);
    case ir::ExprKind::let: {
      ir::Expr cur = e;
      while (const auto* let = cur.as<ir::LetNode>()) {
        bind_let(*let);
        cur = let->body;
      }
      return compile_value(cur);
    }
    case ir::ExprKind::if_: return compile_if(*e.as<ir::IfNode>(), false);
    case ir::ExprKind::match: return compile_match(*e.as<ir::MatchNode>(), false);
    case ir::ExprKind::tuple: {
      const std::vector<std::uint32_t> fields = compile_args(e.as<ir::TupleNode>()->fields);
      const std::uint32_t dst = new_reg();
      emit({.opcode = Opcode::AllocADT, .dst = dst, .a = kTupleTag, .b = mc_.args(fields),
            .c = static_cast<std::uint32_t>(fields.size())});
      return dst;
    }
    case ir::ExprKind::tuple_get: {
      const auto* n = e.as<ir::TupleGetNode>();
      const std::uint32_t tuple = compile_value(n->tuple);
      const std::uint32_t dst = new_reg();
      emit({.opcode = Opcode::GetField, .dst = dst, .a = tuple, .b = n->index});
      return dst;
    }
    case ir::ExprKind::function:
      return alloc_closure(*e.as<ir::FunctionNode>(), nullptr,
                           fmt::format("{}.closure{}", mc_.data().functions[self_index_].name,
                                       closures_++));
  }
  NIMBLE_ASSERT(false, "compile_value: unknown expression kind");
  return kNoReg;
}

void FunctionCompiler::compile_tail(const ir::Expr& e) {
  ir::Expr cur = e;
  while (const auto* let = cur.as<ir::LetNode>()) {
    // `let x = v; x` (the builder names every value so) returns v: v is in
    // tail position, so that a call there is a TailCall and a match or if
    // returns from each arm — a walk recursing from inside a match runs as
    // a loop, not as a frame per step whose result is moved back through
    // every arm (W2's tree walk: a third of its instructions).
    if (const auto* returned = let->body.as<ir::VarNode>();
        returned != nullptr && returned == let->var.as<ir::VarNode>() && let->value.as<ir::FunctionNode>() == nullptr) {
      cur = let->value;
      continue;
    }
    bind_let(*let);
    cur = let->body;
  }
  if (const auto* n = cur.as<ir::IfNode>()) {
    compile_if(*n, true);
    return;
  }
  if (const auto* n = cur.as<ir::MatchNode>()) {
    compile_match(*n, true);
    return;
  }
  std::uint32_t result;
  if (const auto* call = cur.as<ir::CallNode>()) {
    result = compile_call(*call, true);
    if (result == kNoReg) return;  // a TailCall
  } else {
    result = compile_value(cur);
  }
  emit({.opcode = Opcode::Ret, .a = result});
}

std::uint32_t FunctionCompiler::compile_if(const ir::IfNode& node, bool tail) {
  const std::uint32_t cond = compile_value(node.cond);
  const std::size_t branch = emit({.opcode = Opcode::If, .a = cond, .b = encode_jump(1)});
  if (tail) {
    compile_tail(node.then_branch);
    patch_jump(branch, 2, pc());
    compile_tail(node.else_branch);
    return kNoReg;
  }
  const std::uint32_t dst = new_reg();
  emit({.opcode = Opcode::Move, .dst = dst, .a = compile_value(node.then_branch)});
  const std::size_t skip = emit({.opcode = Opcode::Goto});
  patch_jump(branch, 2, pc());
  emit({.opcode = Opcode::Move, .dst = dst, .a = compile_value(node.else_branch)});
  patch_jump(skip, 0, pc());
  return dst;
}

// Calls of a global, a known closure, a closure value or a constructor; op
// calls go to compile_op_call. Returns kNoReg after a TailCall.
std::uint32_t FunctionCompiler::compile_call(const ir::CallNode& call, bool tail) {
  if (call.callee.as<ir::OpNode>()) return compile_op_call(call);
  if (const auto* fn = call.callee.as<ir::FunctionNode>(); fn && fn->primitive) return compile_op_call(call);
  std::vector<std::uint32_t> args = compile_args(call.args);
  if (const auto* ctor = call.callee.as<ir::ConstructorNode>()) {
    const std::uint32_t dst = new_reg();
    emit({.opcode = Opcode::AllocADT, .dst = dst, .a = ctor->tag, .b = mc_.args(args),
          .c = static_cast<std::uint32_t>(args.size())});
    return dst;
  }
  std::int64_t func = -1;
  if (const auto* g = call.callee.as<ir::GlobalVarNode>()) {
    func = mc_.global_index(g->name);
  } else if (const auto* v = call.callee.as<ir::VarNode>()) {
    const Binding& b = env_.at(v);
    if (b.reg == kNoReg) {
      func = b.func;
      args.insert(args.begin(), b.captured.begin(), b.captured.end());
    }
  }
  if (func >= 0) {
    const auto f = static_cast<std::uint32_t>(func);
    if (tail) {
      emit({.opcode = Opcode::TailCall, .a = f, .b = mc_.args(args),
            .c = static_cast<std::uint32_t>(args.size())});
      return kNoReg;
    }
    const std::uint32_t dst = new_reg();
    emit({.opcode = Opcode::Invoke, .dst = dst, .a = f, .b = mc_.args(args),
          .c = static_cast<std::uint32_t>(args.size())});
    return dst;
  }
  const std::uint32_t closure = compile_value(call.callee);
  const std::uint32_t dst = new_reg();
  emit({.opcode = Opcode::InvokeClosure, .dst = dst, .a = closure, .b = mc_.args(args),
        .c = static_cast<std::uint32_t>(args.size())});
  return dst;
}

}  // namespace nimble::vm
