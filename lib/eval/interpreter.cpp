// The reference interpreter (see include/nimble/interpreter.hpp).
//
// Environments map variables to values. A closure captures a copy of the
// environment it is made in; a closure bound by a let may call itself through
// that let (a local loop), which is resolved at call time instead of being
// stored in the closure, so that no reference cycle is made. Calls in tail
// position reuse the current C++ frame: the body loop below continues with
// the callee instead of recursing.
#include "nimble/interpreter.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <exception>
#include <unordered_map>

#include "ir/op.hpp"
#include "support/check.hpp"
#include "ir/signature_from_ir.hpp"
#include "support/stack_guard.hpp"
#include "support/out_of_memory.hpp"

namespace nimble {
namespace {

using ir::Expr;
using Env = std::unordered_map<const ir::VarNode*, Value>;

struct Closure final : Object {
  Closure(const ir::FunctionNode* f, Env e, const ir::VarNode* s)
      : fn(f), env(std::move(e)), self(s) {}
  const ir::FunctionNode* fn;
  Env env;                    // the captured variables
  const ir::VarNode* self;    // the let variable that names this closure, if any
};

class Interpreter {
 public:
  explicit Interpreter(const ir::Module& module) : module_(module) {}

  Value call_global(const std::string& name, std::vector<Value> args) {
    const Expr fn = module_.find_function(name);
    NIMBLE_ASSERT(fn.defined(), "call_global: unknown function");
    return run(fn.as<ir::FunctionNode>(), Env{}, nullptr, Ref<Object>(), std::move(args));
  }

 private:
  // Runs `fn` on `args`; tail calls continue in this loop.
  Value run(const ir::FunctionNode* fn, Env env, const ir::VarNode* self,
            Ref<Object> self_value, std::vector<Value> args) {
    for (;;) {
      bind_params(*fn, env, std::move(args));
      if (self) env[self] = Value::object(self_value);
      Expr cur = fn->body;
      // Walk the body: lets, then ifs and matches choose a branch, until an
      // expression that is a call (a tail call) or a value.
      for (;;) {
        if (const auto* let = cur.as<ir::LetNode>()) {
          if (let->body.same_as(let->var) && !let->value.as<ir::FunctionNode>()) {
            cur = let->value;  // `let %x = v; %x` is v in tail position
            continue;
          }
          env[let->var.as<ir::VarNode>()] = eval_let_value(*let, env);
          cur = let->body;
        } else if (const auto* if_node = cur.as<ir::IfNode>()) {
          cur = truth(eval(if_node->cond, env)) ? if_node->then_branch : if_node->else_branch;
        } else if (const auto* match = cur.as<ir::MatchNode>()) {
          cur = select_clause(*match, eval(match->value, env), env);
        } else {
          break;
        }
      }
      const auto* call = cur.as<ir::CallNode>();
      if (!call || call->callee.as<ir::OpNode>() || call->callee.as<ir::ConstructorNode>())
        return eval(cur, env);
      // A tail call of a function: continue with it in this frame.
      std::vector<Value> next_args = eval_args(*call, env);
      Callee callee = resolve_callee(call->callee, env);
      fn = callee.fn;
      env = std::move(callee.env);
      self = callee.self;
      self_value = std::move(callee.self_value);
      args = std::move(next_args);
    }
  }

  struct Callee {
    const ir::FunctionNode* fn;
    Env env;
    const ir::VarNode* self = nullptr;
    Ref<Object> self_value;
  };

  Callee resolve_callee(const Expr& callee, Env& env) {
    if (const auto* g = callee.as<ir::GlobalVarNode>())
      return {module_.find_function(g->name).as<ir::FunctionNode>(), Env{}, nullptr, {}};
    const Value v = eval(callee, env);
    const Ref<Object>& object = v.object();
    auto* closure = static_cast<Closure*>(object.get());
    return {closure->fn, closure->env, closure->self, object};
  }

  static void bind_params(const ir::FunctionNode& fn, Env& env, std::vector<Value> args) {
    NIMBLE_ASSERT(args.size() == fn.params.size(), "call arity was checked by type inference");
    for (std::size_t i = 0; i < args.size(); ++i)
      env[fn.params[i].as<ir::VarNode>()] = std::move(args[i]);
  }

  Value eval_let_value(const ir::LetNode& let, Env& env) {
    // A function bound by a let may call itself: remember which variable.
    if (const auto* fn = let.value.as<ir::FunctionNode>())
      return Value::object(make_ref<Closure>(fn, env, let.var.as<ir::VarNode>()));
    return eval(let.value, env);
  }

  static bool truth(const Value& v) { return v.tensor().data<bool>()[0]; }

  std::vector<Value> eval_args(const ir::CallNode& call, Env& env) {
    std::vector<Value> args;
    args.reserve(call.args.size());
    for (const Expr& a : call.args) args.push_back(eval(a, env));
    return args;
  }

  Value eval(const Expr& e, Env& env) {
    check_stack("the interpreter");
    switch (e.kind()) {
      case ir::ExprKind::var: {
        auto it = env.find(e.as<ir::VarNode>());
        NIMBLE_ASSERT(it != env.end(), "variables are bound (the verifier checked)");
        return it->second;
      }
      case ir::ExprKind::constant: return e.as<ir::ConstantNode>()->value;
      case ir::ExprKind::constructor: return Value::adt(e.as<ir::ConstructorNode>()->tag, {});
      case ir::ExprKind::global_var:
        return Value::object(make_ref<Closure>(
            module_.find_function(e.as<ir::GlobalVarNode>()->name).as<ir::FunctionNode>(), Env{},
            nullptr));
      case ir::ExprKind::op:
        throw_error(ErrorKind::invalid_argument, "an operator cannot be used as a value");
      case ir::ExprKind::call: return eval_call(*e.as<ir::CallNode>(), env);
      case ir::ExprKind::let:
      case ir::ExprKind::if_:
      case ir::ExprKind::match: return eval_block(e, env);
      case ir::ExprKind::tuple: {
        std::vector<Value> fields;
        for (const Expr& f : e.as<ir::TupleNode>()->fields) fields.push_back(eval(f, env));
        return Value::tuple(std::move(fields));
      }
      case ir::ExprKind::tuple_get: {
        const auto* n = e.as<ir::TupleGetNode>();
        return eval(n->tuple, env)[n->index];
      }
      case ir::ExprKind::function:
        return Value::object(make_ref<Closure>(e.as<ir::FunctionNode>(), env, nullptr));
    }
    NIMBLE_ASSERT(false, "eval: unknown expression kind");
    return {};
  }

  // A let chain, if or match not in tail position: its own scope.
  Value eval_block(const Expr& e, Env& env) {
    Env inner = env;
    Expr cur = e;
    for (;;) {
      if (const auto* let = cur.as<ir::LetNode>()) {
        inner[let->var.as<ir::VarNode>()] = eval_let_value(*let, inner);
        cur = let->body;
      } else if (const auto* if_node = cur.as<ir::IfNode>()) {
        cur = truth(eval(if_node->cond, inner)) ? if_node->then_branch : if_node->else_branch;
      } else if (const auto* match = cur.as<ir::MatchNode>()) {
        cur = select_clause(*match, eval(match->value, inner), inner);
      } else {
        return eval(cur, inner);
      }
    }
  }

  Value eval_call(const ir::CallNode& call, Env& env) {
    std::vector<Value> args = eval_args(call, env);
    if (const auto* op = call.callee.as<ir::OpNode>()) {
      const ir::OpDef& def = *op->def;
      if (!def.reference)
        throw_error(ErrorKind::not_supported,
                    "not supported: the op {} has no reference implementation yet", def.name);
      try {
        return def.reference(args, call.attrs);
      } catch (Error& err) {
        throw err.with_context(def.name);
      }
    }
    if (const auto* ctor = call.callee.as<ir::ConstructorNode>())
      return Value::adt(ctor->tag, std::move(args));
    Callee callee = resolve_callee(call.callee, env);
    return run(callee.fn, std::move(callee.env), callee.self, std::move(callee.self_value),
               std::move(args));
  }

  // The body of the first clause whose pattern matches `value`, with the
  // pattern's variables bound in `env`.
  Expr select_clause(const ir::MatchNode& match, const Value& value, Env& env) {
    for (const ir::Clause& clause : match.clauses)
      if (matches(clause.pattern, value, env)) return clause.body;
    throw_error(ErrorKind::runtime_error, "match: no clause matches the value (constructor #{})",
                value.kind() == Value::Kind::adt ? static_cast<int>(value.tag()) : -1);
  }

  static bool matches(const ir::Pattern& p, const Value& v, Env& env) {
    check_stack("the interpreter (patterns)");
    switch (p.kind()) {
      case ir::PatternKind::wildcard: return true;
      case ir::PatternKind::var:
        env[p.as<ir::PatternVarNode>()->var.as<ir::VarNode>()] = v;
        return true;
      case ir::PatternKind::constructor: {
        const auto* c = p.as<ir::PatternConstructorNode>();
        if (v.tag() != c->ctor.as<ir::ConstructorNode>()->tag) return false;
        for (std::size_t i = 0; i < c->fields.size(); ++i)
          if (!matches(c->fields[i], v[i], env)) return false;
        return true;
      }
      case ir::PatternKind::tuple: {
        const auto* t = p.as<ir::PatternTupleNode>();
        for (std::size_t i = 0; i < t->fields.size(); ++i)
          if (!matches(t->fields[i], v[i], env)) return false;
        return true;
      }
    }
    return false;
  }

  const ir::Module& module_;
};

// Runs `work` on a thread with a large stack, rethrowing what it throws.
template <class Work>
void run_with_large_stack(Work& work) {
  struct Job {
    Work* work;
    std::exception_ptr error;
  } job{&work, nullptr};
  auto entry = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->work)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, std::size_t{1} << 30);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, entry, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    work();  // no thread could be made: run here, with the caller's stack
    return;
  }
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace

Value evaluate(const ir::Module& module, std::string_view entry, std::vector<Value> args) {
  const std::string name(entry);
  const Expr fn = module.find_function(name);
  if (!fn.defined())
    throw_error(ErrorKind::invalid_argument, "evaluate: the module has no function @{}", name);
  if (!module.is_entry(name))
    throw_error(ErrorKind::invalid_argument, "evaluate: @{} is not an entry point", name);
  const auto& params = fn.as<ir::FunctionNode>()->params;
  if (args.size() != params.size())
    throw_error(ErrorKind::type_error, "@{}: expected {} arguments, got {}", name, params.size(),
                args.size());
  // The VM's checker, so that both engines reject a bad argument alike.
  const std::vector<vm::AdtDesc> adts = vm::adt_descs(module);
  std::vector<vm::TypeDesc> types;  // the checker keeps views of their symbols' names
  for (const ir::Expr& p : params) types.push_back(vm::to_type_desc(p.as<ir::VarNode>()->type_annotation));
  vm::ArgumentCheckCache cache;
  vm::ArgumentChecker checker(adts, name, cache);
  for (std::size_t i = 0; i < args.size(); ++i)
    checker.check(i, params[i].as<ir::VarNode>()->name, types[i], args[i]);

  Value result;
  auto work = [&] { result = Interpreter(module).call_global(name, std::move(args)); };
  with_memory_errors("evaluate", [&] { run_with_large_stack(work); });
  return result;
}

}  // namespace nimble
