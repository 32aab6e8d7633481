#include "eval/reference_provider.hpp"

#include <cstring>

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
    // output_shapes names the op in its errors itself.
    const std::vector<Shape> shapes = ops::output_shapes(op_, inputs, attrs_);
    NIMBLE_ASSERT(shapes.size() == outputs.size(), "one shape per result");
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      Tensor out = *outputs[k];
      if (out.numel() != static_cast<std::int64_t>(shapes[k].rank()))
        throw_error(ErrorKind::runtime_error, "{}: the shape function gave rank {}, the type says {}",
                    op_.name, shapes[k].rank(), out.numel());
      std::copy(shapes[k].begin(), shapes[k].end(), out.data<std::int64_t>());
    }
  }

 private:
  const ir::OpDef& op_;
  ir::Attrs attrs_;
};

class ReferenceProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "reference"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    const ir::Module m = ir::parse(prim.source, prim.name.c_str());
    if (m.functions().size() != 1) return {};
    const auto* fn = m.functions()[0].second.as<ir::FunctionNode>();
    const auto* call = fn ? fn->body.as<ir::CallNode>() : nullptr;
    const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
    if (!op) return {};  // a fused primitive: not (yet) served by reference kernels
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
