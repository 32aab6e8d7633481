#include "eval/reference_provider.hpp"

#include <cstring>
#include <optional>
#include <unordered_map>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "nimble/runtime/kernel.hpp"
#include "ops/shape_function.hpp"
#include "support/check.hpp"

namespace nimble {

namespace {

void copy_into(const Tensor& result, const Tensor& out, std::string_view op) {
  if (result.dtype() != out.dtype() || !(result.shape() == out.shape()))
    throw_error(ErrorKind::runtime_error,
                "{}: the kernel made {}{} but its output was allocated as {}{}", op,
                to_string(result.dtype()), to_string(result.shape()), to_string(out.dtype()),
                to_string(out.shape()));
  if (result.nbytes() == 0) return;
  Tensor dst = out;
  std::memcpy(dst.raw_data(), result.raw_data(), result.nbytes());
}

std::vector<Value> as_values(Kernel::TensorRefs tensors) {
  std::vector<Value> values;
  values.reserve(tensors.size());
  for (const Tensor* t : tensors) values.emplace_back(*t);
  return values;
}

// An op's reference kernel, writing into the VM's outputs.
class OpKernel final : public Kernel {
 public:
  OpKernel(const ir::OpDef& op, ir::Attrs attrs) : op_(op), attrs_(std::move(attrs)) {}
  void run(TensorRefs inputs, TensorRefs outputs) const override {
    run_values(as_values(inputs), outputs);
  }
  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    Value result;
    try {
      result = op_.reference(inputs, attrs_);
    } catch (Error& e) {
      throw e.with_context(op_.name);
    }
    if (result.is_tensor()) {
      NIMBLE_ASSERT(outputs.size() == 1, "one output for a tensor result");
      copy_into(result.tensor(), *outputs[0], op_.name);
      return;
    }
    const std::span<const Value> fields = result.fields();
    NIMBLE_ASSERT(fields.size() == outputs.size(), "one output per tuple field");
    for (std::size_t k = 0; k < fields.size(); ++k) copy_into(fields[k].tensor(), *outputs[k], op_.name);
  }

 private:
  const ir::OpDef& op_;
  ir::Attrs attrs_;
};

// An op's shape function: one i64[rank] output per result.
class ShapeKernel final : public Kernel {
 public:
  ShapeKernel(const ir::OpDef& op, ir::Attrs attrs) : op_(op), attrs_(std::move(attrs)) {}
  void run(TensorRefs inputs, TensorRefs outputs) const override {
    run_values(as_values(inputs), outputs);
  }
  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    if (ops::has_data_dependent_shape(op_) && outputs.size() == 1) {
      // The kernel decides the shape (as output_shapes does), read without
      // collecting shapes: stack runs once per inference of a model that
      // collects its steps.
      Value result;
      try {
        result = op_.reference(inputs, attrs_);
      } catch (Error& e) {
        throw e.with_context(op_.name);
      }
      write(result.tensor().shape(), *outputs[0]);
      return;
    }
    // output_shapes names the op in its errors itself.
    const std::vector<Shape> shapes = ops::output_shapes(op_, inputs, attrs_);
    NIMBLE_ASSERT(shapes.size() == outputs.size(), "one shape per result");
    for (std::size_t k = 0; k < shapes.size(); ++k) write(shapes[k], *outputs[k]);
  }

 private:
  void write(const Shape& shape, const Tensor& output) const {
    Tensor out = output;
    if (out.numel() != static_cast<std::int64_t>(shape.rank()))
      throw_error(ErrorKind::runtime_error, "{}: the shape function gave rank {}, the type says {}",
                  op_.name, shape.rank(), out.numel());
    std::copy(shape.begin(), shape.end(), out.data<std::int64_t>());
  }

  const ir::OpDef& op_;
  ir::Attrs attrs_;
};

Value make_tuple(std::vector<Value> fields) { return Value::tuple(std::move(fields)); }
ir::Type make_tuple(std::vector<ir::Type> fields) { return ir::tuple_type(std::move(fields)); }

// A fused primitive: lets of op calls on its parameters and scalar
// constants (or tuples of them: concatenate's parts).
struct FusedBody {
  struct Step {
    const ir::VarNode* var;
    const ir::CallNode* call;
  };
  std::vector<const ir::VarNode*> params;
  std::vector<Step> steps;
  const ir::VarNode* result = nullptr;

  // nullopt unless `fn`'s body has that form.
  static std::optional<FusedBody> of(const ir::FunctionNode& fn) {
    FusedBody b;
    for (const ir::Expr& p : fn.params) b.params.push_back(p.as<ir::VarNode>());
    ir::Expr cur = fn.body;
    while (const auto* let = cur.as<ir::LetNode>()) {
      const auto* call = let->value.as<ir::CallNode>();
      if (!call || !call->callee.as<ir::OpNode>()) return std::nullopt;
      b.steps.push_back({let->var.as<ir::VarNode>(), call});
      cur = let->body;
    }
    b.result = cur.as<ir::VarNode>();
    if (b.steps.empty() || !b.result) return std::nullopt;
    return b;
  }

  // Runs the steps on `inputs` with `step(op, args, attrs)` giving each
  // value; returns the result's. T is a Value (the kernel) or an ir::Type
  // (the shape function).
  template <class T, class ConstFn, class StepFn>
  T run(std::span<const T> inputs, ConstFn&& constant, StepFn&& step) const {
    std::unordered_map<const ir::VarNode*, T> env;
    for (std::size_t i = 0; i < params.size(); ++i) env.emplace(params[i], inputs[i]);
    const auto value_of = [&](const ir::Expr& a) -> T {
      if (const auto* v = a.as<ir::VarNode>()) return env.at(v);
      return constant(a.as<ir::ConstantNode>()->value);
    };
    std::vector<T> args;
    for (const Step& s : steps) {
      args.clear();
      for (const ir::Expr& a : s.call->args) {
        if (const auto* tuple = a.as<ir::TupleNode>()) {  // concatenate's parts
          std::vector<T> fields;
          for (const ir::Expr& f : tuple->fields) fields.push_back(value_of(f));
          args.push_back(make_tuple(std::move(fields)));
        } else {
          args.push_back(value_of(a));
        }
      }
      const ir::OpDef& op = *s.call->callee.as<ir::OpNode>()->def;
      try {
        env.insert_or_assign(s.var, step(op, std::span<const T>(args), s.call->attrs));
      } catch (Error& e) {
        throw e.with_context(op.name);
      }
    }
    return env.at(result);
  }
};

// A fused primitive, op by op with the reference kernels.
class FusedKernel final : public Kernel {
 public:
  FusedKernel(ir::Module m, FusedBody body) : module_(std::move(m)), body_(std::move(body)) {}
  void run(TensorRefs inputs, TensorRefs outputs) const override {
    run_values(as_values(inputs), outputs);
  }
  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    const Value result = body_.run<Value>(
        inputs, [](const Tensor& c) { return Value(c); },
        [](const ir::OpDef& op, std::span<const Value> args, const ir::Attrs& attrs) {
          return op.reference(args, attrs);
        });
    NIMBLE_ASSERT(result.is_tensor() && outputs.size() == 1, "a fused group gives one tensor");
    copy_into(result.tensor(), *outputs[0], "fused kernel");
  }

 private:
  ir::Module module_;  // owns the nodes body_ points into
  FusedBody body_;
};

ir::Type concrete_type(const Tensor& t) {
  return ir::tensor_type(std::vector<ir::Dim>(t.shape().begin(), t.shape().end()), t.dtype());
}

// A fused primitive's shape function: its ops' type relations on the
// inputs' concrete types (fused groups hold no op whose shape depends on data).
class FusedShapeKernel final : public Kernel {
 public:
  FusedShapeKernel(ir::Module m, FusedBody body) : module_(std::move(m)), body_(std::move(body)) {}
  void run(TensorRefs inputs, TensorRefs outputs) const override {
    std::vector<ir::Type> types;
    for (const Tensor* t : inputs) types.push_back(concrete_type(*t));
    const ir::Type result = body_.run<ir::Type>(
        types, [](const Tensor& c) { return concrete_type(c); },
        [](const ir::OpDef& op, std::span<const ir::Type> args, const ir::Attrs& attrs) {
          try {
            return op.type_relation(args, attrs);
          } catch (const Error& e) {
            // With every dim known, a type error is a run-time shape mismatch.
            throw Error(ErrorKind::invalid_argument, e.message());
          }
        });
    const auto* t = result.as<ir::TensorTypeNode>();
    NIMBLE_ASSERT(t != nullptr && outputs.size() == 1, "a fused group gives one tensor");
    Tensor out = *outputs[0];
    if (out.numel() != static_cast<std::int64_t>(t->rank()))
      throw_error(ErrorKind::runtime_error, "fused shape function: rank {}, the type says {}",
                  t->rank(), out.numel());
    for (std::size_t d = 0; d < t->rank(); ++d) {
      if (!t->shape[d].is_fixed())
        throw_error(ErrorKind::runtime_error,
                    "fused shape function: dim {} of {} is not determined by the input shapes", d,
                    ir::to_string(result));
      out.data<std::int64_t>()[d] = t->shape[d].value();
    }
  }
  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    std::vector<const Tensor*> tensors;
    for (const Value& v : inputs) tensors.push_back(&v.tensor());
    run(tensors, outputs);
  }

 private:
  ir::Module module_;
  FusedBody body_;
};

class ReferenceProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "reference"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    // The reference kernels read and write host memory.
    if (!prim.device.is_cpu() && !allocator_for(prim.device).host_accessible()) return {};
    const ir::Module m = ir::parse(prim.source, prim.name.c_str());
    if (m.functions().size() != 1) return {};
    const auto* fn = m.functions()[0].second.as<ir::FunctionNode>();
    const auto* call = fn ? fn->body.as<ir::CallNode>() : nullptr;
    const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
    if (!op) {
      std::optional<FusedBody> body = fn ? FusedBody::of(*fn) : std::nullopt;
      if (!body) return {};
      for (const FusedBody::Step& s : body->steps)
        if (!s.call->callee.as<ir::OpNode>()->def->reference) return {};
      if (prim.kind == PrimitiveKind::shape_function)
        return make_ref<FusedShapeKernel>(m, std::move(*body));
      return make_ref<FusedKernel>(m, std::move(*body));
    }
    if (prim.kind == PrimitiveKind::shape_function)
      return make_ref<ShapeKernel>(*op->def, call->attrs);
    if (!op->def->reference) return {};
    return make_ref<OpKernel>(*op->def, call->attrs);
  }
};

}  // namespace

void register_reference_provider() {
  KernelCache::global().add_provider(std::make_shared<ReferenceProvider>(), -100);
}

}  // namespace nimble
