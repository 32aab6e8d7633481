// Ops that collect the results of a loop: stack (a List of tensors into one
// tensor) and dynamic_update_slice (write a block into a preallocated one).
#include "ops/ops.hpp"
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

}  // namespace

const OpDef& stack() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{0}}};
  static const OpDef def{
      .name = "stack", .arg_names = kList, .attrs = attrs, .type_relation = &stack_relation};
  return def;
}

const OpDef& dynamic_update_slice() {
  static const OpDef def{.name = "dynamic_update_slice",
                         .arg_names = kUpdateArgs,
                         .attrs = {},
                         .type_relation = &dynamic_update_slice_relation};
  return def;
}

}  // namespace nimble::ops
