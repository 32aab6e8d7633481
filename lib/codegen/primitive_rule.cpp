#include "codegen/primitive_rule.hpp"

#include <fmt/format.h>

#include <unordered_map>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "support/check.hpp"
#include "support/stack_guard.hpp"

namespace nimble::codegen {

namespace {

// A value of the primitive's body: a tensor or a (nested) tuple of them.
struct RuleValue {
  te::Tensor tensor;
  std::vector<RuleValue> fields;  // a tuple when non-empty or !tensor.defined()
};

void flatten(const RuleValue& v, std::vector<te::Tensor>& out) {
  if (v.tensor.defined()) {
    out.push_back(v.tensor);
    return;
  }
  for (const RuleValue& f : v.fields) flatten(f, out);
}

struct Declined {};  // an op without a compute rule

class RuleBuilder {
 public:
  RuleValue param(const ir::Type& type, const std::string& name, PrimitiveRule& rule) {
    if (const auto* t = type.as<ir::TensorTypeNode>()) {
      RuleValue v{te::placeholder_for(*t, name, symbols_), {}};
      rule.inputs.push_back(v.tensor);
      return v;
    }
    const auto* tuple = type.as<ir::TupleTypeNode>();
    if (!tuple) throw Declined{};  // an ADT or function parameter: not a tensor kernel
    rule.has_tuple_input = true;
    RuleValue v;
    for (std::size_t i = 0; i < tuple->fields.size(); ++i)
      v.fields.push_back(param(tuple->fields[i], fmt::format("{}.{}", name, i), rule));
    return v;
  }

  RuleValue eval(const ir::Expr& e) {
    check_stack("a primitive's shape rule");
    switch (e->kind) {
      case ir::ExprKind::var: {
        const auto it = env_.find(e.get());
        NIMBLE_ASSERT(it != env_.end(), "primitive_rule: an unbound variable");
        return it->second;
      }
      case ir::ExprKind::let: {
        const auto* let = e.as<ir::LetNode>();
        env_.emplace(let->var.get(), eval(let->value));
        return eval(let->body);
      }
      case ir::ExprKind::tuple: {
        RuleValue v;
        for (const ir::Expr& f : e.as<ir::TupleNode>()->fields) v.fields.push_back(eval(f));
        return v;
      }
      case ir::ExprKind::tuple_get: {
        const auto* get = e.as<ir::TupleGetNode>();
        RuleValue t = eval(get->tuple);
        NIMBLE_ASSERT(get->index < t.fields.size(), "primitive_rule: a field out of range");
        return t.fields[get->index];
      }
      case ir::ExprKind::call:
        return call(*e.as<ir::CallNode>());
      case ir::ExprKind::constant: {
        // A fused group's scalar constant: a rank-0 stage the kernel folds.
        const Tensor& value = e.as<ir::ConstantNode>()->value;
        if (value.rank() != 0) break;
        te::Expr c;
        switch (value.dtype()) {
          case DType::f32:
          case DType::f64: c = te::constant(value.dtype(), value.element_as_double(0)); break;
          case DType::i64: c = te::int_imm(*value.data<std::int64_t>(), DType::i64); break;
          case DType::i32: c = te::int_imm(*value.data<std::int32_t>(), DType::i32); break;
          case DType::boolean: c = te::int_imm(*value.data<bool>() ? 1 : 0, DType::boolean); break;
          default: throw Declined{};
        }
        return {te::compute({}, "constant", [&](std::span<const te::Var>) { return c; }), {}};
      }
      default:
        break;
    }
    throw Declined{};
  }

  std::unordered_map<const ir::ExprNode*, RuleValue> env_;

 private:
  RuleValue call(const ir::CallNode& c) {
    const auto* op = c.callee.as<ir::OpNode>();
    if (!op || op->def->compute == nullptr) throw Declined{};
    std::vector<te::Tensor> args;
    for (const ir::Expr& a : c.args) flatten(eval(a), args);
    std::vector<te::Tensor> results = op->def->compute(args, c.attrs);
    const auto* tuple = c.checked_type.as<ir::TupleTypeNode>();
    if (!tuple) {
      NIMBLE_ASSERT(results.size() == 1, "a tensor result is one te tensor");
      return {results[0], {}};
    }
    RuleValue v;
    for (te::Tensor& t : results) v.fields.push_back({std::move(t), {}});
    return v;
  }

  te::SymbolTable symbols_;
};

// The name a parameter gets: the op's argument name where it feeds an op
// call directly (and only one op uses it), else p<i>.
std::string param_name(const ir::FunctionNode& fn, std::size_t i) {
  const auto* call = fn.body.as<ir::CallNode>();
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  if (op && call->args.size() == fn.params.size() && call->args[i].same_as(fn.params[i]) &&
      i < op->def->arg_names.size())
    return std::string(op->def->arg_names[i]);
  return fmt::format("p{}", i);
}

}  // namespace

std::optional<PrimitiveRule> primitive_rule(const PrimitiveInfo& prim) {
  if (prim.kind != PrimitiveKind::compute) return std::nullopt;
  const ir::Module m = ir::parse(prim.source, prim.name.c_str());
  if (m.functions().size() != 1) return std::nullopt;
  ir::infer_types(m);  // which calls give tuples
  const auto* fn = m.functions()[0].second.as<ir::FunctionNode>();
  if (!fn) return std::nullopt;
  PrimitiveRule rule;
  RuleBuilder builder;
  try {
    for (std::size_t i = 0; i < fn->params.size(); ++i) {
      const auto* var = fn->params[i].as<ir::VarNode>();
      builder.env_.emplace(var, builder.param(var->type_annotation, param_name(*fn, i), rule));
    }
    flatten(builder.eval(fn->body), rule.outputs);
  } catch (const Declined&) {
    return std::nullopt;
  }
  return rule;
}

}  // namespace nimble::codegen
