#include "ops/shape_function.hpp"

#include <fmt/format.h>

#include "ops/ops.hpp"
#include "runtime/builtin_kernels.hpp"
#include "support/check.hpp"

namespace nimble::ops {
namespace {

// The type of a run-time value: every dim fixed.
ir::Type concrete_type(const Value& v) {
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();
    return ir::tensor_type(std::vector<ir::Dim>(t.shape().begin(), t.shape().end()), t.dtype());
  }
  NIMBLE_ASSERT(v.kind() == Value::Kind::tuple,
                "data-independent ops take tensors and tuples of tensors");
  std::vector<ir::Type> fields;
  for (const Value& f : v.fields()) fields.push_back(concrete_type(f));
  return ir::tuple_type(std::move(fields));
}

// False if some dim is left open: a relation may not pin a dim down even when
// every input dim is known (reshape's -1 over zero elements).
bool collect_shapes(const ir::Type& t, std::vector<Shape>& out) {
  if (const auto* tensor = t.as<ir::TensorTypeNode>()) {
    std::vector<std::int64_t> dims;
    for (const ir::Dim& d : tensor->shape) {
      if (!d.is_fixed()) return false;
      dims.push_back(d.value());
    }
    out.emplace_back(std::span<const std::int64_t>(dims));
    return true;
  }
  const auto* tuple = t.as<ir::TupleTypeNode>();
  NIMBLE_ASSERT(tuple != nullptr, "ops produce tensors or tuples of tensors");
  for (const ir::Type& f : tuple->fields)
    if (!collect_shapes(f, out)) return false;
  return true;
}

void collect_shapes(const Value& v, std::vector<Shape>& out) {
  if (v.is_tensor()) {
    out.push_back(v.tensor().shape());
    return;
  }
  for (const Value& f : v.fields()) collect_shapes(f, out);
}

}  // namespace

bool has_data_dependent_shape(const ir::OpDef& op) noexcept {
  static const ir::OpDef* const kDataDependent[] = {&arange(), &nonzero(), &zeros(),
                                                    &ones(),   &full(),    &dynamic_strided_slice(),
                                                    &stack()};
  for (const ir::OpDef* d : kDataDependent)
    if (d == &op) return true;
  return false;
}

std::vector<Shape> output_shapes(const ir::OpDef& op, std::span<const Value> args,
                                 const ir::Attrs& attrs) {
  std::vector<Shape> shapes;
  bool from_types = !has_data_dependent_shape(op);
  if (from_types) {
    std::vector<ir::Type> types;
    for (const Value& a : args) types.push_back(concrete_type(a));
    try {
      from_types = collect_shapes(op.type_relation(types, attrs), shapes);
    } catch (const Error& e) {
      // With every dim known, a type error is a run-time shape mismatch.
      throw Error(ErrorKind::invalid_argument, fmt::format("{}: {}", op.name, e.message()));
    }
    if (from_types) return shapes;
    shapes.clear();  // the kernel decides the open dims
  }
  NIMBLE_ASSERT(op.reference != nullptr, "every op has a reference kernel");
  try {
    // stack's shape is its list's length and element shape: read from the
    // elements' shapes, not their data (which may be on a GPU).
    if (&op == &stack() && args.size() == 1)
      return {runtime::stacked_shape(args[0], std::get<std::int64_t>(ir::attr_or_default(op, attrs, "axis")))};
    collect_shapes(op.reference(args, attrs), shapes);
  } catch (Error& e) {
    throw e.with_context(op.name);
  }
  return shapes;
}

}  // namespace nimble::ops
