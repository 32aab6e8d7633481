// Ops that collect the results of a loop: stack (a List of tensors into one
// tensor) and dynamic_update_slice (write a block into a preallocated one).
//
// Reference semantics:
//  - stack(list): the list is a value of the standard List ADT (tag 0 = Nil
//    with no fields, tag 1 = Cons(head, tail)), walked iteratively (lists
//    may be long). The elements, first element first, are stacked along a
//    new axis `axis` (0 by default). They must share one shape and dtype
//    (else Error(invalid_argument) / Error(type_error)); an empty list is
//    Error(invalid_argument), since the element shape is unknown.
//  - dynamic_update_slice(dest, update, offset): a copy of dest with update
//    written at rows [offset, offset + rows(update)) of axis 0; update's
//    other dims must equal dest's (else invalid_argument), and the rows must
//    lie inside dest (else Error(runtime_error); a negative offset is out of range).
//
// Compute rules: stack is opaque (its argument is a List value, walked by
// the VM, not a tensor a loop nest can index). dynamic_update_slice is
// injective: out[i, ...] = update[i - offset, ...] for the rows in
// [offset, offset + rows), dest[i, ...] elsewhere; it checks that update's
// other dims match dest's and that the rows lie inside dest.
#include <algorithm>
#include <array>
#include <span>
#include <vector>
#include <cstring>

#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "runtime/builtin_kernels.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kList[] = {"list"};
constexpr std::string_view kUpdateArgs[] = {"dest", "update", "offset"};

Type stack_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const auto* list = args[0].as<ir::AdtTypeNode>();
  const TensorTypeNode* element = list && list->name == "List" && list->args.size() == 1
                                      ? list->args[0].as<TensorTypeNode>()
                                      : nullptr;
  if (!element)
    throw_error(ErrorKind::type_error, "list must be a List of tensors, got {}",
                ir::to_string(args[0]));
  // The axis numbers a dim of the result, whose extent is the list's length.
  const std::size_t axis = normalize_axis(int_attr(stack(), attrs, "axis"), element->rank() + 1);
  Shape shape = element->shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), ir::Any);
  return ir::tensor_type(std::move(shape), element->dtype);
}

Type dynamic_update_slice_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& dest = expect_tensor(args, 0, dynamic_update_slice());
  const TensorTypeNode& update = expect_tensor(args, 1, dynamic_update_slice());
  const TensorTypeNode& offset = expect_tensor(args, 2, dynamic_update_slice());
  expect_same_dtype(dest, "dest", update, "update");
  expect_min_rank(dest, "dest", 1);
  if (update.rank() != dest.rank())
    throw_error(ErrorKind::type_error, "update has rank {} but dest has rank {}", update.rank(),
                dest.rank());
  const Dim& rows = update.shape[0];
  if (rows.is_fixed() && dest.shape[0].is_fixed() && rows.value() > dest.shape[0].value())
    throw_error(ErrorKind::type_error, "update has {} rows but dest has only {}", rows.value(),
                dest.shape[0].value());
  for (std::size_t d = 1; d < dest.rank(); ++d)
    if (!merge_equal_dim(update.shape[d], dest.shape[d]))
      throw_error(ErrorKind::type_error, "update has {} at dim {} but dest has {}",
                  ir::to_string(update.shape[d]), d, ir::to_string(dest.shape[d]));
  expect_dtype(offset, "offset", DType::i64);
  expect_scalar(offset, "offset");
  return args[0];
}

// --- reference kernels ------------------------------------------------------------------

// The runtime's: an exported model runs the same code without the compiler.
Value stack_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  NIMBLE_ASSERT(!args.empty(), "stack: missing argument");
  return runtime::stack_list(args[0], int_attr(stack(), attrs, "axis"));
}

Value dynamic_update_slice_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& dest = ref::tensor_arg(args, 0);
  const Tensor& update = ref::tensor_arg(args, 1);
  const std::vector<std::int64_t> offset_values =
      ref::i64_values(ref::tensor_arg(args, 2), "offset");
  if (offset_values.size() != 1)
    throw_error(ErrorKind::invalid_argument, "offset must be an i64 scalar, got {} elements",
                offset_values.size());
  if (dest.dtype() != update.dtype())
    throw_error(ErrorKind::type_error, "dest is {} but update is {}", to_string(dest.dtype()),
                to_string(update.dtype()));
  const bool same_rows =
      dest.rank() >= 1 && update.rank() == dest.rank() &&
      std::equal(dest.shape().begin() + 1, dest.shape().end(), update.shape().begin() + 1);
  if (!same_rows)
    throw_error(ErrorKind::invalid_argument, "update {} does not fit the rows of dest {}",
                nimble::to_string(update.shape()), nimble::to_string(dest.shape()));
  const std::int64_t offset = offset_values[0];
  const std::int64_t rows = update.shape()[0];
  if (offset < 0 || offset > dest.shape()[0] - rows)
    throw_error(ErrorKind::runtime_error, "update {} at offset {} is out of range for dest {}",
                nimble::to_string(update.shape()), offset, nimble::to_string(dest.shape()));
  Tensor out = dest.clone();
  if (update.nbytes() != 0)
    std::memcpy(static_cast<std::byte*>(out.raw_data()) +
                    static_cast<std::size_t>(offset) *
                        (dest.nbytes() / static_cast<std::size_t>(dest.shape()[0])),
                update.raw_data(), update.nbytes());
  return out;
}

// --- compute rules ------------------------------------------------------------------------

std::vector<te::Tensor> dynamic_update_slice_rule(std::span<const te::Tensor> inputs,
                                                  const ir::Attrs&) {
  const te::Tensor& dest = inputs[0];
  const te::Tensor& update = inputs[1];
  const te::Expr offset = inputs[2]({});
  const te::Expr& rows = update.shape()[0];
  std::vector<te::Check> checks;
  for (std::size_t d = 1; d < dest.ndim(); ++d)
    te::add_check(checks, te::eq(update.shape()[d], dest.shape()[d]), ErrorKind::invalid_argument,
                  fmt::format("update does not match dest at dim {}", d));
  te::add_check(checks, offset >= 0 && offset <= dest.shape()[0] - rows, ErrorKind::runtime_error,
                "update at offset is out of range for dest");
  return {te::compute(
      dest.shape(), "dynamic_update_slice",
      [&](std::span<const te::Var> i) {
        std::vector<te::Expr> index = te::as_indices(i);
        const te::Expr inside = i[0] >= offset && i[0] < offset + rows;
        te::Expr kept = dest(index);
        index[0] = i[0] - offset;
        return te::select(inside, update(std::move(index)), kept);
      },
      std::move(checks))};
}

}  // namespace

const OpDef& stack() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{0}}};
  // Opaque: its argument is a List value that the VM walks, not a tensor.
  static const OpDef def{.name = "stack",
                         .arg_names = kList,
                         .attrs = attrs,
                         .type_relation = &stack_relation,
                         .pattern = ir::OpPattern::opaque,
                         .compute = nullptr,
                         .reference = &stack_kernel,
                         .summary = "The tensors of a List, first first, stacked along a new axis.",
                         .example = {"%l: List<f32[4]>", "stack(%l, axis=0)"}};
  return def;
}

const OpDef& dynamic_update_slice() {
  static const OpDef def{.name = "dynamic_update_slice",
                         .arg_names = kUpdateArgs,
                         .attrs = {},
                         .type_relation = &dynamic_update_slice_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &dynamic_update_slice_rule,
                         .reference = &dynamic_update_slice_kernel,
                         .summary = "dest with update written at rows [offset, offset + rows) of "
                                    "axis 0.",
                         .example = {"%dest: f32[n, 4], %update: f32[2, 4], %offset: i64[]",
                                     "dynamic_update_slice(%dest, %update, %offset)"}};
  return def;
}

}  // namespace nimble::ops
